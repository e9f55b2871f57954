use super::*;

fn config() -> AccumulatorConfig {
    AccumulatorConfig {
        batch_size: 200,
        linger_ms: 5,
        buffer_memory: 1000,
        max_request_size: 500,
        transactional: false,
        compression: Compression::None,
    }
}

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

#[test]
fn records_share_a_batch_closed_once_another_like_the_last_would_not_fit() {
    let acc = Accumulator::new(config());
    let slot = acc.topic_slots(&Arc::from("t"), 1).remove(0);
    // 200 bytes a batch: the 61-byte header, then 58 bytes a record of 50, 18 of 10.
    let a = acc.append(&tp(), 1, None, Some(&[0; 50]), &[], 0).unwrap();
    let b = acc.append(&tp(), 1, None, Some(&[0; 10]), &[], 0).unwrap();
    assert!(a.wake_engine, "a opened the batch");
    assert!(
        !b.wake_engine && slot.has_open_batch(),
        "another 18 bytes fit: still open"
    );
    let c = acc.append(&tp(), 1, None, Some(&[0; 50]), &[], 0).unwrap();
    assert!(Arc::ptr_eq(&a.completion, &b.completion) && Arc::ptr_eq(&a.completion, &c.completion));
    assert_eq!((a.index, b.index, c.index), (0, 1, 2));
    // 195 bytes: another record of 50 would not fit, so the batch is full now, not at the
    // next record.
    assert!(c.wake_engine && !slot.has_open_batch());
    assert_eq!(acc.take_ready(false, |_| false).len(), 1);
    let d = acc.append(&tp(), 1, None, Some(&[0; 50]), &[], 0).unwrap();
    assert!(d.wake_engine && !Arc::ptr_eq(&a.completion, &d.completion));
    assert!(slot.has_open_batch());
}

/// Uncompressed, a batch takes records up to `batch.size` exactly: the compressed-size
/// estimate and its safety margin apply only to compressed batches.
#[test]
fn an_uncompressed_batch_fills_to_batch_size_exactly() {
    let value = [0; 50];
    let record =
        BatchBuilder::record_size_alone(BatchBuilder::record_fixed_len(None, Some(&value), &[]));
    let acc = Accumulator::new(AccumulatorConfig {
        batch_size: RECORD_BATCH_HEADER_LEN + 2 * record,
        ..config()
    });
    let slot = acc.topic_slots(&Arc::from("t"), 1).remove(0);
    let a = acc.append(&tp(), 1, None, Some(&value), &[], 0).unwrap();
    let b = acc.append(&tp(), 1, None, Some(&value), &[], 0).unwrap();
    assert!(Arc::ptr_eq(&a.completion, &b.completion), "b fits exactly");
    assert!(
        b.wake_engine && !slot.has_open_batch(),
        "and fills the batch"
    );
    let batches = acc.take_ready(false, |_| false);
    assert_eq!(batches.len(), 1);
    assert_eq!(
        batches[0].batch.size_in_bytes(),
        RECORD_BATCH_HEADER_LEN + 2 * record
    );
}

#[test]
fn the_engine_picks_which_open_batches_close_and_flush_closes_all() {
    let acc = Accumulator::new(config());
    acc.append(&tp(), 1, None, Some(b"v"), &[], 10).unwrap();
    assert_eq!(acc.next_linger_deadline(|_| true), Some(15));
    assert_eq!(acc.next_linger_deadline(|_| false), None);
    assert!(acc.lingered_partitions(14).is_empty());
    assert_eq!(acc.lingered_partitions(15), vec![tp()]);
    // Kept open past its linger time (it could not go out).
    assert!(acc.take_ready(false, |_| false).is_empty());
    assert!(acc.has_pending());
    assert_eq!(acc.take_ready(false, |p| *p == tp()).len(), 1);
    // Closed before its linger time (it joins a request leaving now).
    acc.append(&tp(), 1, None, Some(b"v"), &[], 20).unwrap();
    assert!(acc.lingered_partitions(21).is_empty());
    assert_eq!(acc.take_ready(false, |_| true).len(), 1);
    acc.append(&tp(), 1, None, Some(b"v"), &[], 30).unwrap();
    assert_eq!(acc.take_ready(true, |_| false).len(), 1);
    assert!(!acc.has_pending());
}

#[cfg(feature = "lz4")]
#[test]
fn compressed_batches_grow_with_the_learned_ratio_within_max_request_size() {
    let acc = Accumulator::new(AccumulatorConfig {
        batch_size: 4096,
        buffer_memory: 1 << 30,
        max_request_size: 20_000,
        compression: Compression::Lz4,
        ..config()
    });
    let value = br#"{"user":"someone","action":"click","page":"/home","ok":true}"#;
    let mut batches = Vec::new();
    for _ in 0..20_000 {
        acc.append(&tp(), 1, None, Some(value), &[], 0).unwrap();
        batches.extend(acc.take_ready(false, |_| false));
    }
    batches.extend(acc.take_all().closed);
    // The first batch assumes no gain: 4 KiB of records. Later ones hold more records as
    // the estimate improves, but never more than max.request.size of them.
    let first = &batches[0].batch;
    assert!(first.uncompressed_size_in_bytes() <= 4096);
    let last = &batches[batches.len() - 2].batch;
    assert!(last.record_count() > 2 * first.record_count());
    for closed in &batches {
        assert!(closed.batch.uncompressed_size_in_bytes() <= 20_000);
        assert!(
            closed.batch.size_in_bytes() <= 4096 + 200,
            "{:?}",
            closed.batch
        );
    }
    // Memory is accounted uncompressed, and comes back in full.
    let held: usize = batches
        .iter()
        .map(|c| c.batch.uncompressed_size_in_bytes())
        .sum();
    assert_eq!(acc.buffered_bytes(), held);
    for closed in &batches {
        acc.release(closed.batch.uncompressed_size_in_bytes());
    }
    assert_eq!(acc.buffered_bytes(), 0);
}

/// The slots `send` keeps per topic are the ones the engine drains: a record appended
/// through one shares the batch of a record appended by partition.
#[test]
fn topic_slots_are_the_partitions_slots() {
    let acc = Accumulator::new(config());
    let by_name = acc.append(&tp(), 1, None, Some(b"v"), &[], 0).unwrap();
    let slots = acc.topic_slots(&tp().topic, 2);
    assert_eq!(slots.len(), 2);
    assert_eq!(slots[1].partition(), &TopicPartition::new("t", 1));
    let by_slot = acc
        .append_deferring_seal(
            &slots[0],
            1,
            None,
            Some(b"v"),
            &[],
            &tracing::Span::none(),
            || 0,
        )
        .unwrap();
    assert!(Arc::ptr_eq(&by_name.completion, &by_slot.completion));
    assert_eq!(by_slot.index, 1);
    let ready = acc.take_ready(true, |_| false);
    assert_eq!(ready.len(), 1, "partition 1 has no record");
}

#[test]
fn a_batch_sealed_outside_the_lock_keeps_its_place() {
    let acc = Accumulator::new(config());
    let other = TopicPartition::new("t", 1);
    let value = [0u8; 150];
    let slots = acc.topic_slots(&tp().topic, 1);
    let first = acc
        .append_deferring_seal(
            &slots[0],
            1,
            None,
            Some(&value),
            &[],
            &tracing::Span::none(),
            || 0,
        )
        .unwrap();
    assert_eq!(first.to_seal.len(), 1, "150 bytes fill a 200-byte batch");
    let to_seal = first.to_seal.into_iter().next().unwrap();
    // A later batch of the same partition, and one of another partition.
    let second = acc.append(&tp(), 1, None, Some(&value), &[], 0).unwrap();
    acc.append(&other, 1, None, Some(&value), &[], 0).unwrap();
    let ready = acc.take_ready(false, |_| false);
    assert_eq!(ready.len(), 1, "only the other partition's batch");
    assert_eq!(ready[0].partition, other);
    assert!(acc.has_pending());
    acc.put_sealed(to_seal.seal());
    let ready = acc.take_ready(false, |_| false);
    assert_eq!(ready.len(), 2);
    assert!(Arc::ptr_eq(&ready[0].completion, &first.completion));
    assert!(Arc::ptr_eq(&ready[1].completion, &second.completion));
    assert!(!acc.has_pending());
}

#[test]
fn take_all_removes_a_batch_being_sealed_and_its_return_finds_no_place() {
    let acc = Accumulator::new(config());
    let value = [0u8; 150];
    let slots = acc.topic_slots(&tp().topic, 1);
    let first = acc
        .append_deferring_seal(
            &slots[0],
            1,
            None,
            Some(&value),
            &[],
            &tracing::Span::none(),
            || 0,
        )
        .unwrap();
    let to_seal = first.to_seal.into_iter().next().unwrap();
    let second = acc.append(&tp(), 1, None, Some(&value), &[], 0).unwrap();
    let held = acc.buffered_bytes();
    // A purge or an abort while the first batch is away: both go, the one being sealed
    // with what failing it needs.
    let taken = acc.take_all();
    assert_eq!(taken.closed.len(), 1);
    assert!(Arc::ptr_eq(&taken.closed[0].completion, &second.completion));
    assert_eq!(taken.sealing.len(), 1);
    let unsealed = &taken.sealing[0];
    assert!(Arc::ptr_eq(&unsealed.completion, &first.completion));
    assert_eq!(unsealed.record_count, 1);
    let closed_bytes = taken.closed[0].batch.uncompressed_size_in_bytes();
    assert_eq!(unsealed.uncompressed_bytes + closed_bytes, held);
    assert!(!acc.has_pending());
    // Sealed later, it is not put back: nothing of it is sent.
    acc.put_sealed(to_seal.seal());
    assert!(!acc.has_pending());
    assert!(acc.take_ready(true, |_| true).is_empty());
}

#[test]
fn limits_are_enforced_without_side_effects() {
    let acc = Accumulator::new(config());
    let err = acc
        .append(&tp(), 1, None, Some(&[0; 600]), &[], 0)
        .unwrap_err();
    assert!(matches!(
        err,
        AppendError::TooLarge {
            setting: "max.request.size",
            ..
        }
    ));
    // Each 150-byte record fills a 200-byte batch of its own (~220 bytes with the header).
    for _ in 0..4 {
        acc.append(&tp(), 1, None, Some(&[0; 150]), &[], 0).unwrap();
    }
    assert!(matches!(
        acc.append(&tp(), 1, None, Some(&[0; 150]), &[], 0),
        Err(AppendError::BufferFull)
    ));
    let before = acc.buffered_bytes();
    acc.release(before);
    assert_eq!(acc.buffered_bytes(), 0);
}

#[test]
fn a_closed_gate_refuses_and_an_open_one_takes_records() {
    let acc = Accumulator::new(config());
    acc.gate()
        .publish(Err(Error::InvalidState("outside a transaction".into())));
    assert!(matches!(
        acc.append(&tp(), 1, None, Some(b"v"), &[], 0),
        Err(AppendError::Refused(Error::InvalidState(_)))
    ));
    assert_eq!(acc.buffered_bytes(), 0, "a refused record takes no memory");
    acc.gate().publish(Ok(()));
    assert!(acc.append(&tp(), 1, None, Some(b"v"), &[], 0).is_ok());
}

/// The commit race the gate exists for: senders on several threads append while another
/// closes the gate and then flushes every partition. Every append that succeeded must be
/// in the flushed batches (nothing left behind for after the commit), and none after.
#[test]
fn every_record_that_passed_the_gate_is_in_the_flush_that_follows_its_closing() {
    use std::sync::atomic::AtomicUsize;
    for _round in 0..20 {
        let acc = Arc::new(Accumulator::new(AccumulatorConfig {
            buffer_memory: 1 << 30,
            batch_size: 4096,
            max_request_size: 1 << 20,
            ..config()
        }));
        let accepted = Arc::new(AtomicUsize::new(0));
        let senders: Vec<_> = (0..3)
            .map(|t| {
                let (acc, accepted) = (Arc::clone(&acc), Arc::clone(&accepted));
                std::thread::spawn(move || {
                    let partition = TopicPartition::new("t", t % 2);
                    for _ in 0..200_000 {
                        match acc.append(&partition, 1, None, Some(b"v"), &[], 0) {
                            Ok(_) => accepted.fetch_add(1, Ordering::SeqCst),
                            Err(AppendError::Refused(_)) => return,
                            Err(e) => panic!("{e:?}"),
                        };
                    }
                })
            })
            .collect();
        // Close while they are appending (bounded: the senders stop at 200,000 each).
        let started = std::time::Instant::now();
        while accepted.load(Ordering::SeqCst) < 1000
            && started.elapsed() < std::time::Duration::from_secs(5)
        {
            std::thread::yield_now();
        }
        acc.gate()
            .publish(Err(Error::InvalidState("committing".into())));
        let flushed: usize = acc
            .take_all()
            .closed
            .iter()
            .map(|b| b.batch.record_count() as usize)
            .sum();
        for sender in senders {
            sender.join().unwrap();
        }
        assert_eq!(flushed, accepted.load(Ordering::SeqCst));
        assert!(!acc.has_pending(), "nothing appended after the gate closed");
    }
}

/// The partitions are walked in partition order whatever order their first records came in,
/// so a simulation seed replays the same drains.
#[test]
fn partitions_are_walked_in_partition_order() {
    let acc = Accumulator::new(config());
    let partition = |p| TopicPartition::new("t", p);
    for p in [2, 0, 3, 1] {
        acc.append(&partition(p), 1, None, Some(b"v"), &[], 0)
            .unwrap();
    }
    assert_eq!(
        acc.lingered_partitions(5),
        (0..4).map(partition).collect::<Vec<_>>()
    );
}

/// Java's estimator steps (`CompressionRatioEstimator`): a worse ratio is followed at once and
/// by at least 0.05, a better one by at most 0.005, and the estimate never passes 1.
#[test]
fn the_ratio_estimate_follows_a_worse_ratio_at_once_and_a_better_one_slowly() {
    let close =
        |r: RatioEstimate, want: f64| assert!((r.0 - want).abs() < 1e-9, "{} != {want}", r.0);
    let mut r = RatioEstimate(0.5);
    r.observe(0.5);
    close(r, 0.5);
    r.observe(0.51);
    close(r, 0.55);
    r.observe(0.9);
    close(r, 0.9);
    r.observe(0.1);
    close(r, 0.895);
    r.observe(2.0);
    close(r, 1.0);
}

/// What a closed batch teaches its topic's estimate is its compressed body per byte of
/// records (the batch header, never compressed, left out of both): from an estimate far
/// better than the batch did, the estimate goes to the observed ratio at once.
#[cfg(feature = "lz4")]
#[test]
fn a_closed_batch_teaches_its_topic_its_body_per_record_byte() {
    let acc = Accumulator::new(AccumulatorConfig {
        batch_size: 4096,
        buffer_memory: 1 << 30,
        max_request_size: 1 << 20,
        compression: Compression::Lz4,
        ..config()
    });
    acc.ratios
        .lock()
        .unwrap()
        .insert(Arc::clone(&tp().topic), RatioEstimate(0.001));
    for i in 0..50u32 {
        let value = format!(r#"{{"user":"user-{i}","action":"click","n":{}}}"#, i * 7919);
        acc.append(&tp(), 1, None, Some(value.as_bytes()), &[], 0)
            .unwrap();
    }
    let closed = acc.take_all().closed;
    assert_eq!(closed.len(), 1);
    let batch = &closed[0].batch;
    let observed = (batch.size_in_bytes() - RECORD_BATCH_HEADER_LEN) as f64
        / (batch.uncompressed_size_in_bytes() - RECORD_BATCH_HEADER_LEN) as f64;
    assert!(observed > 0.051, "lz4 keeps more than that: {observed}");
    let learned = acc.ratios.lock().unwrap()[&tp().topic].0;
    assert!((learned - observed).abs() < 1e-9, "{learned} != {observed}");
}

/// A record whose batch is exactly as large as `max.request.size`, or as `buffer.memory`, is
/// taken; one byte less of either and it is refused as too large for it, at once, not left
/// waiting for space.
#[test]
fn a_record_as_large_as_either_bound_fits() {
    let value = [0u8; 400];
    let alone = RECORD_BATCH_HEADER_LEN
        + BatchBuilder::record_size_alone(BatchBuilder::record_fixed_len(None, Some(&value), &[]));
    // (max.request.size, buffer.memory) with `bound` for the one under test.
    type Limits = fn(usize) -> (usize, usize);
    let bounds: [(&str, Limits); 2] = [
        ("max.request.size", |bound| (bound, 10_000)),
        ("buffer.memory", |bound| (10_000, bound)),
    ];
    for (bounded, limits) in bounds {
        let sized = |bound| {
            let (max_request_size, buffer_memory) = limits(bound);
            Accumulator::new(AccumulatorConfig {
                max_request_size,
                buffer_memory,
                ..config()
            })
        };
        sized(alone)
            .append(&tp(), 1, None, Some(&value), &[], 0)
            .unwrap_or_else(|e| panic!("{bounded}: fits exactly, not {e:?}"));
        let refused = sized(alone - 1).append(&tp(), 1, None, Some(&value), &[], 0);
        assert!(
            matches!(refused, Err(AppendError::TooLarge { setting, .. }) if setting == bounded),
            "{bounded}: {refused:?}"
        );
    }
}

/// Memory given back is counted as it goes back to the buffer: the producer's driver compares
/// the count before and after the engine ran to know whether a `send` waiting for space may
/// go on now.
#[test]
fn released_memory_is_counted() {
    let acc = Accumulator::new(config());
    acc.append(&tp(), 1, None, Some(&[0; 50]), &[], 0).unwrap();
    let held = acc.buffered_bytes();
    assert!(held > 0);
    assert_eq!(acc.released_bytes(), 0);
    acc.release(held);
    assert_eq!(acc.buffered_bytes(), 0);
    assert_eq!(acc.released_bytes(), held as u64);
}
