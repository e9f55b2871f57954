/*
 * seqcheck: counts what one bench run delivered, from the run's records as read back by kcat.
 *
 *   kcat -C ... -f '%p %s\n' | seqcheck COUNT
 *
 * Each input line is "PARTITION VALUE"; the value starts with the record's index in the run
 * (the bench programs' --unique-values: up to 12 zero-padded decimal digits). Prints one line:
 *
 *   read R distinct D duplicates X reordered O foreign F
 *
 * distinct: indexes in [0, COUNT) seen at least once; duplicates: lines whose index was already
 * seen; reordered: lines whose index is below the previous line's of the same partition (a
 * single-threaded producer's records keep their send order within a partition); foreign: lines
 * without an index in [0, COUNT) (not this run's records).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTITIONS 4096

int main(int argc, char **argv) {
        if (argc != 2) {
                fprintf(stderr, "usage: seqcheck COUNT < lines\n");
                return 2;
        }
        char *end;
        uint64_t count = strtoull(argv[1], &end, 10);
        if (*end || end == argv[1]) {
                fprintf(stderr, "seqcheck: COUNT must be a number\n");
                return 2;
        }
        uint8_t *seen = calloc(count / 8 + 1, 1);
        int64_t *last = malloc(MAX_PARTITIONS * sizeof(int64_t));
        if (!seen || !last) {
                fprintf(stderr, "seqcheck: out of memory\n");
                return 1;
        }
        for (int p = 0; p < MAX_PARTITIONS; p++)
                last[p] = -1;
        uint64_t read = 0, distinct = 0, duplicates = 0, reordered = 0, foreign = 0;
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        while ((len = getline(&line, &cap, stdin)) != -1) {
                read++;
                char *p = line;
                long partition = strtol(p, &end, 10);
                if (end == p || *end != ' ' || partition < 0 || partition >= MAX_PARTITIONS) {
                        foreign++;
                        continue;
                }
                p = end + 1;
                uint64_t index = 0;
                int digits = 0;
                while (digits < 12 && p[digits] >= '0' && p[digits] <= '9')
                        index = index * 10 + (uint64_t)(p[digits++] - '0');
                if (!digits || index >= count) {
                        foreign++;
                        continue;
                }
                if ((int64_t)index < last[partition])
                        reordered++;
                last[partition] = (int64_t)index;
                if (seen[index / 8] & (1u << (index % 8))) {
                        duplicates++;
                } else {
                        seen[index / 8] |= (uint8_t)(1u << (index % 8));
                        distinct++;
                }
        }
        printf("read %llu distinct %llu duplicates %llu reordered %llu foreign %llu\n",
               (unsigned long long)read, (unsigned long long)distinct,
               (unsigned long long)duplicates, (unsigned long long)reordered,
               (unsigned long long)foreign);
        free(line);
        free(seen);
        free(last);
        return 0;
}
