//! The `cooperative-sticky` assignor of the classic protocol (KIP-54 stickiness, KIP-429
//! cooperative rebalancing), run by the group leader.
//!
//! Same goals as Java's `AbstractStickyAssignor`, in a simpler greedy form:
//! 1. every member keeps the partitions it owns that are still valid (the topic exists, has
//!    the partition and is in the member's subscription; when two members claim a partition
//!    the claim of the highest generation wins, as Java resolves it);
//! 2. partitions nobody keeps go one by one to the least loaded subscriber;
//! 3. while a member has two more partitions than another subscriber of one of its topics,
//!    one partition moves from the most to the least loaded (bounded by the partition count).
//!
//! With identical subscriptions this ends balanced (counts differ by at most one) with the
//! fewest moves; with different subscriptions it is balanced as far as step 3 finds moves
//! (Java searches harder there).
//!
//! Cooperative rule (KIP-429, Java's `CooperativeStickyAssignor` /
//! `ConsumerCoordinator.onJoinComplete`): a partition that leaves its current owner is NOT
//! given to its new owner in this generation. The owner sees it missing, revokes it and
//! rejoins; the next rebalance hands it out (it is then unowned). So no partition is ever
//! owned by two members at once, without every member revoking everything as eager does.

use std::collections::{BTreeMap, BTreeSet};

use super::assignor::Subscription;

type Assignment = BTreeMap<String, BTreeSet<(String, i32)>>;

/// The cooperative sticky assignment: member id -> topic -> partitions. Every member gets an
/// entry, possibly empty; topics `partition_count` does not know are left out.
pub fn assign_cooperative_sticky(
    members: &BTreeMap<String, Subscription>,
    partition_count: impl Fn(&str) -> Option<i32>,
) -> BTreeMap<String, BTreeMap<String, Vec<i32>>> {
    let exists = |topic: &str, p: i32| partition_count(topic).is_some_and(|c| p >= 0 && p < c);
    let subscribes = |member: &str, topic: &str| {
        members
            .get(member)
            .is_some_and(|s| s.topics.iter().any(|t| t == topic))
    };

    // 1. Valid claims, the highest generation winning (ties: the first member id).
    let mut owner: BTreeMap<(String, i32), (i32, String)> = BTreeMap::new();
    for (member, sub) in members {
        for (topic, partitions) in &sub.owned {
            if !sub.topics.contains(topic) {
                continue;
            }
            for &p in partitions {
                if !exists(topic, p) {
                    continue;
                }
                let key = (topic.clone(), p);
                let better = owner
                    .get(&key)
                    .is_none_or(|(generation, _)| sub.generation > *generation);
                if better {
                    owner.insert(key, (sub.generation, member.clone()));
                }
            }
        }
    }
    let previous: BTreeMap<(String, i32), String> =
        owner.into_iter().map(|(k, (_, m))| (k, m)).collect();
    let mut assignment: Assignment = members
        .keys()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for (tp, member) in &previous {
        if let Some(set) = assignment.get_mut(member) {
            set.insert(tp.clone());
        }
    }

    // 2. Unowned partitions to the least loaded subscriber.
    let topics: BTreeSet<&String> = members.values().flat_map(|s| &s.topics).collect();
    for topic in topics {
        let count = partition_count(topic).unwrap_or(0).max(0);
        for p in 0..count {
            let tp = (topic.clone(), p);
            if previous.contains_key(&tp) {
                continue;
            }
            let least = assignment
                .iter()
                .filter(|(m, _)| subscribes(m, topic))
                .min_by_key(|(m, set)| (set.len(), (*m).clone()))
                .map(|(m, _)| m.clone());
            if let Some(m) = least {
                assignment.entry(m).or_default().insert(tp);
            }
        }
    }

    // 3. Balance: move from the most loaded to a subscriber with at least two fewer. Each
    // move lowers the sum of squared counts, so it ends; the bound is a guard.
    let total: usize = assignment.values().map(BTreeSet::len).sum();
    for _ in 0..=total {
        let Some(step) = one_balancing_move(&assignment, &subscribes) else {
            break;
        };
        let (from, to, tp) = step;
        if let Some(set) = assignment.get_mut(&from) {
            set.remove(&tp);
        }
        assignment.entry(to).or_default().insert(tp);
    }

    // KIP-429: a partition changing owner is withheld from the new owner this generation.
    assignment
        .into_iter()
        .map(|(member, set)| {
            let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for tp in set {
                let moving = previous.get(&tp).is_some_and(|old| *old != member);
                if !moving {
                    by_topic.entry(tp.0).or_default().push(tp.1);
                }
            }
            (member, by_topic)
        })
        .collect()
}

/// A partition to move from the most loaded member to a subscriber with at least two fewer
/// partitions: the last partition (by topic and number) of the most loaded member that
/// such a member can take. Members with the most partitions are tried first.
fn one_balancing_move(
    assignment: &Assignment,
    subscribes: &impl Fn(&str, &str) -> bool,
) -> Option<(String, String, (String, i32))> {
    let mut by_load: Vec<(&String, &BTreeSet<(String, i32)>)> = assignment.iter().collect();
    by_load.sort_by_key(|(m, set)| (std::cmp::Reverse(set.len()), (*m).clone()));
    for (from, set) in &by_load {
        for tp in set.iter().rev() {
            let to = by_load
                .iter()
                .rev()
                .filter(|(m, other)| other.len() + 2 <= set.len() && subscribes(m, &tp.0))
                .min_by_key(|(m, other)| (other.len(), (*m).clone()));
            if let Some((to, _)) = to {
                return Some(((*from).clone(), (*to).clone(), tp.clone()));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(topics: &[&str], owned: &[(&str, &[i32])], generation: i32) -> Subscription {
        Subscription {
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            owned: owned
                .iter()
                .map(|(t, ps)| ((*t).to_owned(), ps.to_vec()))
                .collect(),
            generation,
        }
    }

    fn count(out: &BTreeMap<String, BTreeMap<String, Vec<i32>>>, m: &str) -> usize {
        out[m].values().map(Vec::len).sum()
    }

    fn six(_: &str) -> Option<i32> {
        Some(6)
    }

    #[test]
    fn fresh_group_is_balanced_and_complete() {
        let members: BTreeMap<_, _> = [
            ("a".to_owned(), sub(&["t"], &[], -1)),
            ("b".to_owned(), sub(&["t"], &[], -1)),
            ("c".to_owned(), sub(&["t"], &[], -1)),
            ("d".to_owned(), sub(&["t"], &[], -1)),
        ]
        .into();
        let out = assign_cooperative_sticky(&members, six);
        let mut all: Vec<i32> = out.values().flat_map(|m| m["t"].clone()).collect();
        all.sort();
        assert_eq!(all, vec![0, 1, 2, 3, 4, 5]);
        for m in ["a", "b", "c", "d"] {
            assert!((1..=2).contains(&count(&out, m)), "{m}: {out:?}");
        }
    }

    #[test]
    fn a_new_member_takes_only_what_balance_needs_in_two_phases() {
        // a owns everything; b joins.
        let mut members: BTreeMap<_, _> = [
            (
                "a".to_owned(),
                sub(&["t"], &[("t", &[0, 1, 2, 3, 4, 5])], 3),
            ),
            ("b".to_owned(), sub(&["t"], &[], -1)),
        ]
        .into();
        let first = assign_cooperative_sticky(&members, six);
        // Phase one: a keeps three, b gets nothing yet (the three are being revoked by a).
        assert_eq!(count(&first, "a"), 3);
        assert_eq!(count(&first, "b"), 0);
        let kept = first["a"]["t"].clone();
        assert!(kept.iter().all(|p| (0..6).contains(p)));
        // Phase two: a rejoins owning its three; b gets exactly the other three.
        members.insert("a".to_owned(), sub(&["t"], &[("t", kept.as_slice())], 4));
        let second = assign_cooperative_sticky(&members, six);
        assert_eq!(second["a"]["t"], kept, "a keeps its partitions");
        let mut b = second["b"]["t"].clone();
        b.extend(&kept);
        b.sort();
        assert_eq!(b, vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn balanced_owners_keep_everything() {
        let members: BTreeMap<_, _> = [
            ("a".to_owned(), sub(&["t"], &[("t", &[5, 0, 3])], 2)),
            ("b".to_owned(), sub(&["t"], &[("t", &[1, 2, 4])], 2)),
        ]
        .into();
        let out = assign_cooperative_sticky(&members, six);
        assert_eq!(out["a"]["t"], vec![0, 3, 5]);
        assert_eq!(out["b"]["t"], vec![1, 2, 4]);
    }

    #[test]
    fn a_leaving_member_s_partitions_go_to_the_rest_at_once() {
        // c left: its partitions are unowned, so they are handed out in this generation.
        let members: BTreeMap<_, _> = [
            ("a".to_owned(), sub(&["t"], &[("t", &[0, 1])], 2)),
            ("b".to_owned(), sub(&["t"], &[("t", &[2, 3])], 2)),
        ]
        .into();
        let out = assign_cooperative_sticky(&members, six);
        assert_eq!(count(&out, "a"), 3);
        assert_eq!(count(&out, "b"), 3);
        assert!(out["a"]["t"].starts_with(&[0, 1]));
        assert!(out["b"]["t"].starts_with(&[2, 3]));
    }

    #[test]
    fn stale_and_invalid_claims_are_dropped() {
        let members: BTreeMap<_, _> = [
            // a's claim on 0 is from an older generation than b's.
            (
                "a".to_owned(),
                sub(&["t"], &[("t", &[0, 1]), ("gone", &[0])], 1),
            ),
            ("b".to_owned(), sub(&["t"], &[("t", &[0, 9])], 2)),
        ]
        .into();
        let out = assign_cooperative_sticky(&members, |t| (t == "t").then_some(4));
        assert_eq!(out["b"]["t"][0], 0, "the newest claim wins");
        assert!(!out["a"]["t"].contains(&0));
        assert!(!out["a"].contains_key("gone"));
        let mut all: Vec<i32> = out.values().flat_map(|m| m["t"].clone()).collect();
        all.sort();
        assert_eq!(all, vec![0, 1, 2, 3]);
    }

    #[test]
    fn only_subscribers_get_a_topic() {
        let members: BTreeMap<_, _> = [
            ("a".to_owned(), sub(&["t", "u"], &[], -1)),
            ("b".to_owned(), sub(&["t"], &[], -1)),
        ]
        .into();
        let out = assign_cooperative_sticky(&members, |t| Some(if t == "t" { 2 } else { 4 }));
        assert!(!out["b"].contains_key("u"));
        assert_eq!(out["a"]["u"].len(), 4);
        assert_eq!(count(&out, "a") + count(&out, "b"), 6);
        assert!(count(&out, "b") >= 1);
    }
}
