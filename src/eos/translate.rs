//! Conservative upstream → downstream offset translation (rule O2 of ARCHITECTURE.md).
//!
//! MirrorMaker 2 translated a consumer group's upstream offset by adding the upstream distance
//! from its last offset sync to the downstream offset of that sync, assuming both logs advance
//! together. Transaction markers, aborted records, filtered records and replication lag break
//! that assumption: the translated offset pointed past the record it stood for (a consumer
//! switching over skipped records) or past the downstream end (negative lag). KAFKA-12468's
//! fix (apache/kafka#13178) stopped extrapolating. This translator never extrapolates either:
//! it answers only from exact offsets of committed transactions ([`CommittedTransaction`]).

use std::collections::BTreeMap;

use super::copies::CommittedTransaction;
use crate::TopicPartition;

/// Translates a consumer group's committed offset in a source partition (the next offset it
/// would consume) into an offset in a destination partition the copy loop wrote to, such that
/// a consumer starting there never skips a destination record made from a source record at or
/// after that offset, and never starts past the destination's end. The lag computed from it
/// (destination end − translated offset) is never negative.
///
/// It learns from [`OffsetTranslator::record`] with every committed transaction. For an
/// upstream offset `u` of source `s`, translating to destination `d`:
///
/// - **At or between known copies**: when the source stretch from `u` up to the first record
///   at or after `u` that has a copy in `d` was consumed by known transactions, the answer is
///   that copy's exact offset. Offsets skipped on the way (markers, aborted or filtered
///   records) are known to have no copy in `d`, so nothing is skipped.
/// - **Across an unknown stretch** (offsets no known transaction consumed — another copier
///   instance's work, or a gap before a fresh assignment), **or after the last known copy**:
///   one past the last copy in `d` of a source record before `u`. A source partition's records
///   reach a destination partition in source order (one transactional producer at a time owns
///   the source partition and sends in offset order), so every copy of a record at or after
///   `u` lies beyond that copy, and the copy itself is committed, so the answer is at most the
///   destination's end.
/// - **Before the first known copy** (nothing known about `s` → `d` before `u`): `None`. The
///   safe choice is then the destination's beginning (`auto.offset.reset=earliest`): a
///   switch-over may re-read records, never skip them.
///
/// Precision is traded for safety as in KAFKA-12468: a consumer that switches over may re-read
/// a few records, never miss one. Memory grows with the records recorded; bound it with
/// [`OffsetTranslator::forget_before`].
///
/// ```
/// use exactly::TopicPartition;
/// use exactly::eos::{CommittedTransaction, OffsetTranslator};
///
/// # fn learn(committed: &[CommittedTransaction]) {
/// let mut translator = OffsetTranslator::new();
/// for transaction in committed {
///     // What `CopyLoop::step` returned for each committed transaction.
///     translator.record(transaction);
/// }
/// let source = TopicPartition::new("in", 0);
/// let destination = TopicPartition::new("out", 0);
/// // A downstream consumer group takes over from an upstream one whose committed offset on
/// // `in-0` is 42: start it here, or (None) from the destination's beginning.
/// let start = translator.translate(&source, 42, &destination);
/// # let _ = start;
/// # }
/// # learn(&[]);
/// ```
#[derive(Debug, Clone, Default)]
pub struct OffsetTranslator {
    /// Per source partition, the stretches `[from, to)` known transactions consumed, merged
    /// (disjoint and not adjacent), keyed by `from`.
    covered: BTreeMap<TopicPartition, BTreeMap<i64, i64>>,
    /// Per (source, destination) partition, source offset → the lowest and the highest
    /// destination offset of its copies there.
    copies: BTreeMap<(TopicPartition, TopicPartition), BTreeMap<i64, (i64, i64)>>,
}

impl OffsetTranslator {
    /// Knows nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Learns what a committed transaction consumed and produced.
    ///
    /// A source record with a destination offset the broker did not report (-1) is treated as
    /// never consumed: it is left out of the known stretch, so a translation across it falls
    /// back to the conservative answer.
    pub fn record(&mut self, transaction: &CommittedTransaction) {
        let mut unknown: BTreeMap<&TopicPartition, Vec<i64>> = BTreeMap::new();
        for copy in &transaction.copies {
            if copy.destinations.iter().any(|d| d.offset < 0) {
                unknown
                    .entry(&copy.source.partition)
                    .or_default()
                    .push(copy.source.offset);
                continue;
            }
            for d in &copy.destinations {
                let (lowest, highest) = self
                    .copies
                    .entry((copy.source.partition.clone(), d.partition.clone()))
                    .or_default()
                    .entry(copy.source.offset)
                    .or_insert((d.offset, d.offset));
                *lowest = (*lowest).min(d.offset);
                *highest = (*highest).max(d.offset);
            }
        }
        for range in &transaction.consumed {
            let spans = self.covered.entry(range.partition.clone()).or_default();
            let mut holes = unknown.get(&range.partition).cloned().unwrap_or_default();
            holes.sort_unstable();
            let mut from = range.from;
            for hole in holes {
                if hole >= from && hole < range.next {
                    cover(spans, from, hole);
                    from = hole + 1;
                }
            }
            cover(spans, from, range.next);
        }
    }

    /// The destination offset for the upstream offset `upstream` (a group's committed "next
    /// offset") of `source`, in `destination`; `None` when nothing is known before it (see
    /// the type's documentation).
    pub fn translate(
        &self,
        source: &TopicPartition,
        upstream: i64,
        destination: &TopicPartition,
    ) -> Option<i64> {
        let copies = self.copies.get(&(source.clone(), destination.clone()))?;
        if let Some((&next_source, &(next_destination, _))) = copies.range(upstream..).next() {
            let known_up_to_it = next_source == upstream
                || self
                    .covered_until(source, upstream)
                    .is_some_and(|end| end >= next_source);
            if known_up_to_it {
                return Some(next_destination);
            }
        }
        copies
            .range(..upstream)
            .next_back()
            .map(|(_, &(_, last_destination))| last_destination + 1)
    }

    /// Forgets what is known about `source` below `offset` (for bounded memory once no group
    /// will be translated from below it), keeping for each destination the last copy below
    /// it, which the conservative answer needs.
    pub fn forget_before(&mut self, source: &TopicPartition, offset: i64) {
        if let Some(spans) = self.covered.get_mut(source) {
            let mut kept = spans.split_off(&offset);
            if let Some((_, &to)) = spans.iter().next_back()
                && to > offset
            {
                kept.insert(offset, to);
            }
            *spans = kept;
        }
        for ((s, _), copies) in self.copies.iter_mut() {
            if s == source {
                let kept = copies.split_off(&offset);
                let last_below = copies.iter().next_back().map(|(&s, &d)| (s, d));
                *copies = kept;
                if let Some((s, d)) = last_below {
                    copies.insert(s, d);
                }
            }
        }
    }

    /// The end of the known stretch of `source` that holds `offset`, if one does.
    fn covered_until(&self, source: &TopicPartition, offset: i64) -> Option<i64> {
        let (_, &to) = self.covered.get(source)?.range(..=offset).next_back()?;
        (to > offset).then_some(to)
    }
}

/// Adds `[from, to)` to the merged stretches.
fn cover(spans: &mut BTreeMap<i64, i64>, mut from: i64, mut to: i64) {
    if from >= to {
        return;
    }
    if let Some((&f, &t)) = spans.range(..=from).next_back()
        && t >= from
    {
        spans.remove(&f);
        from = f;
        to = to.max(t);
    }
    let inside: Vec<i64> = spans.range(from..=to).map(|(&f, _)| f).collect();
    for f in inside {
        if let Some(t) = spans.remove(&f) {
            to = to.max(t);
        }
    }
    spans.insert(from, to);
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::eos::copies::{ConsumedRange, PartitionOffset, RecordCopy};

    fn src() -> TopicPartition {
        TopicPartition::new("in", 0)
    }
    fn dst() -> TopicPartition {
        TopicPartition::new("out", 0)
    }

    fn txn(from: i64, next: i64, copies: &[(i64, &[i64])]) -> CommittedTransaction {
        CommittedTransaction {
            copies: copies
                .iter()
                .map(|(s, ds)| RecordCopy {
                    source: PartitionOffset::new(src(), *s),
                    destinations: ds.iter().map(|d| PartitionOffset::new(dst(), *d)).collect(),
                })
                .collect(),
            consumed: vec![ConsumedRange {
                partition: src(),
                from,
                next,
            }],
            dead_letters: Vec::new(),
        }
    }

    /// The seed-000 example of MM2's failure: a transactional source with a commit marker
    /// after every record. MM2 extrapolated upstream distance into the destination and
    /// skipped records; here every answer is exact.
    #[test]
    fn markers_between_records_are_not_extrapolated() {
        let mut t = OffsetTranslator::new();
        // Source: records at even offsets, markers at odd ones. Destination: the same records
        // copied in transactions of two, each followed by its own marker.
        t.record(&txn(0, 4, &[(0, &[0]), (2, &[1])]));
        t.record(&txn(4, 8, &[(4, &[3]), (6, &[4])]));
        let expect = [
            (0, 0),
            (1, 1),
            (2, 1),
            (3, 3),
            (4, 3),
            (5, 4),
            (6, 4),
            (7, 5),
            (8, 5),
        ];
        for (upstream, downstream) in expect {
            assert_eq!(
                t.translate(&src(), upstream, &dst()),
                Some(downstream),
                "upstream {upstream}"
            );
        }
    }

    #[test]
    fn filtered_and_fanned_out_records() {
        let mut t = OffsetTranslator::new();
        // 10 filtered, 11 fanned out to two records, 12 filtered.
        t.record(&txn(10, 13, &[(10, &[]), (11, &[20, 21]), (12, &[])]));
        assert_eq!(t.translate(&src(), 10, &dst()), Some(20));
        assert_eq!(t.translate(&src(), 11, &dst()), Some(20));
        // After the last copy: one past it, never past the end (the end is at least 22).
        assert_eq!(t.translate(&src(), 12, &dst()), Some(22));
        assert_eq!(t.translate(&src(), 13, &dst()), Some(22));
        assert_eq!(t.translate(&src(), 1_000, &dst()), Some(22));
    }

    #[test]
    fn before_the_first_known_copy_is_unknown() {
        let mut t = OffsetTranslator::new();
        t.record(&txn(50, 52, &[(50, &[7]), (51, &[8])]));
        assert_eq!(t.translate(&src(), 49, &dst()), None);
        assert_eq!(t.translate(&src(), 0, &dst()), None);
        assert_eq!(t.translate(&src(), 50, &dst()), Some(7));
        assert_eq!(
            t.translate(&src(), 50, &TopicPartition::new("other", 0)),
            None
        );
    }

    #[test]
    fn an_unknown_stretch_falls_back_to_one_past_the_last_copy_before_it() {
        let mut t = OffsetTranslator::new();
        t.record(&txn(0, 2, &[(0, &[0]), (1, &[1])]));
        // 2..5 copied by another instance (unknown here) to 3, 4, 5.
        t.record(&txn(5, 7, &[(5, &[7]), (6, &[8])]));
        for upstream in 2..5 {
            assert_eq!(t.translate(&src(), upstream, &dst()), Some(2));
        }
        assert_eq!(t.translate(&src(), 5, &dst()), Some(7));
    }

    /// A copy without a reported offset leaves a hole in its own consumed stretch only: two
    /// stretches of one transaction, the hole in the second, leave what lies between them
    /// unknown.
    #[test]
    fn a_hole_stays_in_its_own_stretch() {
        let mut t = OffsetTranslator::new();
        let mut two = txn(0, 2, &[(0, &[0]), (1, &[1]), (5, &[7]), (6, &[-1])]);
        two.consumed.push(ConsumedRange {
            partition: src(),
            from: 5,
            next: 7,
        });
        t.record(&two);
        for upstream in 2..5 {
            assert_eq!(t.translate(&src(), upstream, &dst()), Some(2), "{upstream}");
        }
    }

    #[test]
    fn a_copy_without_a_reported_offset_is_not_trusted() {
        let mut t = OffsetTranslator::new();
        t.record(&txn(0, 3, &[(0, &[0]), (1, &[-1]), (2, &[2])]));
        assert_eq!(t.translate(&src(), 0, &dst()), Some(0));
        assert_eq!(t.translate(&src(), 1, &dst()), Some(1));
        assert_eq!(t.translate(&src(), 2, &dst()), Some(2));
    }

    #[test]
    fn forgetting_keeps_the_conservative_answer() {
        let mut t = OffsetTranslator::new();
        t.record(&txn(0, 4, &[(0, &[0]), (1, &[1]), (3, &[2])]));
        t.forget_before(&src(), 2);
        assert_eq!(t.translate(&src(), 0, &dst()), None, "forgotten");
        assert_eq!(t.translate(&src(), 2, &dst()), Some(2));
        assert_eq!(t.translate(&src(), 3, &dst()), Some(2));
        assert_eq!(t.translate(&src(), 4, &dst()), Some(3));
    }

    /// A known stretch that runs across the offset forgotten below stays known from that
    /// offset on, so the answers above it stay exact: here 2 and 3 were filtered out and the
    /// second transaction's copy sits past the first one's commit marker (destination 2).
    #[test]
    fn forgetting_keeps_the_known_stretch_above_the_offset() {
        let mut t = OffsetTranslator::new();
        t.record(&txn(0, 2, &[(0, &[0]), (1, &[1])]));
        t.record(&txn(2, 5, &[(4, &[3])]));
        assert_eq!(t.translate(&src(), 3, &dst()), Some(3));
        t.forget_before(&src(), 3);
        assert_eq!(t.translate(&src(), 3, &dst()), Some(3), "still exact");
        assert_eq!(t.translate(&src(), 4, &dst()), Some(3));
    }

    /// Forgetting below an offset of one source leaves another source's copies to the same
    /// destination as they were.
    #[test]
    fn forgetting_one_source_keeps_the_others() {
        let other = TopicPartition::new("in", 1);
        let mut t = OffsetTranslator::new();
        t.record(&txn(0, 4, &[(0, &[0]), (1, &[1]), (3, &[2])]));
        let mut from_other = txn(0, 2, &[(0, &[10]), (1, &[11])]);
        for copy in &mut from_other.copies {
            copy.source.partition = other.clone();
        }
        from_other.consumed[0].partition = other.clone();
        t.record(&from_other);
        t.forget_before(&src(), 2);
        assert_eq!(t.translate(&other, 0, &dst()), Some(10));
        assert_eq!(t.translate(&other, 1, &dst()), Some(11));
        assert_eq!(t.translate(&src(), 3, &dst()), Some(2));
    }

    #[test]
    fn stretches_merge() {
        let mut spans = BTreeMap::new();
        cover(&mut spans, 5, 7);
        cover(&mut spans, 0, 2);
        cover(&mut spans, 2, 5);
        cover(&mut spans, 10, 12);
        cover(&mut spans, 6, 11);
        assert_eq!(spans.into_iter().collect::<Vec<_>>(), vec![(0, 12)]);
    }

    /// Property: over random source logs (records, markers, aborted records), random
    /// transforms (filter, copy, fan-out), destinations shared with other writers, and
    /// transactions of which the translator sees only some, every translation is at most the
    /// destination offset of the first copy made of a record at or after the upstream offset
    /// (or the destination end when there is none), so it never skips a record and the lag
    /// is never negative; with every transaction known it is exact.
    #[test]
    fn translation_is_conservative_and_exact_when_everything_is_known() {
        for seed in 0..500u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            // Even seeds: the translator sees every transaction, each starting where the
            // previous one committed. Odd seeds: it misses some, and some start at their first
            // record (a fresh assignment), so only conservativeness is checked.
            let see_all = seed % 2 == 0;
            let mut t = OffsetTranslator::new();
            // (source offset, destination offsets) of every copied record, known or not.
            let mut truth: Vec<(i64, Vec<i64>)> = Vec::new();
            let mut source_offset = 0i64;
            let mut destination_end = 0i64;
            let mut known_from: Option<i64> = None;
            for _ in 0..rng.random_range(1..8) {
                let from = source_offset;
                let mut copies = Vec::new();
                for _ in 0..rng.random_range(1..6) {
                    // Aborted records and markers take source offsets and are never delivered.
                    source_offset += rng.random_range(0..3);
                    // Other writers' records and markers in the destination.
                    destination_end += rng.random_range(0..3);
                    let fan_out = [0, 1, 1, 1, 2][rng.random_range(0..5)];
                    let ds: Vec<i64> = (0..fan_out).map(|i| destination_end + i).collect();
                    destination_end += fan_out;
                    truth.push((source_offset, ds.clone()));
                    copies.push((source_offset, ds));
                    source_offset += 1;
                }
                source_offset += rng.random_range(1..3); // the source's commit marker
                destination_end += 1; // ours
                let next = source_offset;
                // Some transactions begin at their first record instead of at the previous
                // commit (a fresh assignment), leaving a gap of markers unknown.
                let from = if !see_all && rng.random_bool(0.3) {
                    copies[0].0
                } else {
                    from
                };
                if see_all || rng.random_bool(0.5) {
                    known_from.get_or_insert(from);
                    let borrowed: Vec<(i64, &[i64])> =
                        copies.iter().map(|(s, d)| (*s, d.as_slice())).collect();
                    t.record(&txn(from, next, &borrowed));
                }
            }
            for upstream in 0..=source_offset + 2 {
                let first_copy_at_or_after = truth
                    .iter()
                    .filter(|(s, ds)| *s >= upstream && !ds.is_empty())
                    .map(|(_, ds)| ds[0])
                    .next()
                    .unwrap_or(destination_end);
                let got = t.translate(&src(), upstream, &dst());
                if let Some(got) = got {
                    assert!(
                        got <= first_copy_at_or_after,
                        "seed {seed} upstream {upstream}: {got} skips the copy at {first_copy_at_or_after}"
                    );
                    assert!(destination_end - got >= 0, "seed {seed}: negative lag");
                }
                let any_copy_before = truth.iter().any(|(s, ds)| *s < upstream && !ds.is_empty());
                let copy_at_or_after = truth.iter().any(|(s, ds)| *s >= upstream && !ds.is_empty());
                if see_all
                    && known_from.is_some_and(|f| upstream >= f)
                    && (any_copy_before || copy_at_or_after)
                {
                    let last_copy_end = truth
                        .iter()
                        .filter_map(|(_, ds)| ds.last())
                        .max()
                        .map_or(0, |d| d + 1);
                    let exact = if copy_at_or_after {
                        first_copy_at_or_after
                    } else {
                        last_copy_end
                    };
                    assert_eq!(got, Some(exact), "seed {seed} upstream {upstream}");
                }
            }
        }
    }
}
