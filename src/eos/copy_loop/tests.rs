//! The copy loop stopped at each of its await points (rule C1): a step dropped there, or a
//! call that timed out there, leaves a stage the next step resolves, with every source record
//! exactly once in the destination and in the reports; and a producer used behind the loop's
//! back is noticed, never committed over. The fakes (`fake.rs`) hold the loop `Pending` where
//! a test wants it; the simulation and tests/eos.rs run the same cases against the real engine
//! and the real broker.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::CopyLoop;
use super::fake::{Call, DESTINATION, FakeSink, FakeSource, Transform, Waiting, World, mirror};
use crate::Error;
use crate::eos::CommittedTransaction;
use crate::eos::endpoints::CopySink;
use crate::eos::stage::{EndStep, Stage};

type Copier = CopyLoop<Transform, FakeSource, FakeSink>;

/// Two partitions of 20 records, 5 records a poll, a commit every 6 records.
fn setup() -> (Rc<RefCell<World>>, Copier) {
    let world = World::new(2, 20, 5);
    let copier = CopyLoop::new(
        FakeSource(Rc::clone(&world)),
        FakeSink(Rc::clone(&world)),
        mirror(Rc::clone(&world)),
    )
    .commit_every(6, Duration::from_millis(100));
    (world, copier)
}

fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Runs `future` to its end: the fakes wait only while a test holds them (or a few polls
/// for a call to an unreachable coordinator, until it times out).
fn run<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    for _ in 0..100 {
        if let Poll::Ready(output) = poll_once(future.as_mut()) {
            return output;
        }
    }
    panic!("the loop waits though nothing holds it");
}

/// Starts a step and drops it once it waits at `at` (within a bound of polls).
fn drop_step_at(world: &Rc<RefCell<World>>, copier: &mut Copier, at: Waiting) {
    let mut step = pin!(copier.step());
    for _ in 0..20 {
        world.borrow_mut().waiting = None;
        match poll_once(step.as_mut()) {
            Poll::Ready(outcome) => panic!("the step ended ({outcome:?}) before waiting at {at:?}"),
            Poll::Pending if world.borrow().waiting == Some(at) => return,
            Poll::Pending => {}
        }
    }
    panic!("the step never waited at {at:?}");
}

/// Steps until the group committed every source record (bounded), returning the committed
/// transactions reported and the errors steps returned.
fn copy_to_the_end(
    world: &Rc<RefCell<World>>,
    copier: &mut Copier,
) -> (Vec<CommittedTransaction>, Vec<Error>) {
    let ends: BTreeMap<i32, i64> = world
        .borrow()
        .source
        .iter()
        .enumerate()
        .map(|(p, &n)| (p as i32, n))
        .collect();
    let (mut reports, mut errors) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        match run(copier.step()) {
            Ok(Some(transaction)) => reports.push(transaction),
            Ok(None) if world.borrow().committed == ends => return (reports, errors),
            Ok(None) => {}
            Err(e) => {
                assert!(!e.is_fatal(), "{e}");
                errors.push(e);
            }
        }
    }
    panic!(
        "not copied within 200 steps: committed {:?}, errors {errors:?}",
        world.borrow().committed
    );
}

/// Read committed, the destination holds every source record once, in order; the group
/// committed every source record; and the reports name every source record once, each at the
/// destination offset it landed at (rule O1).
fn assert_exactly_once(world: &Rc<RefCell<World>>, reports: &[CommittedTransaction]) {
    let world = world.borrow();
    assert_eq!(world.destination, world.expected(), "read_committed");
    let mut reported: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for copy in reports.iter().flat_map(|t| &t.copies) {
        let [destination] = copy.destinations.as_slice() else {
            panic!("{copy:?} has not one destination");
        };
        let partition = copy.source.partition.partition;
        assert_eq!(destination.partition.partition, partition);
        let landed = &world.destination[&partition][destination.offset as usize];
        assert_eq!(*landed, super::fake::value(partition, copy.source.offset));
        reported
            .entry(partition)
            .or_default()
            .push(copy.source.offset);
    }
    for (p, &n) in world.source.iter().enumerate() {
        assert_eq!(
            reported.remove(&(p as i32)).unwrap_or_default(),
            (0..n).collect::<Vec<_>>()
        );
    }
}

/// No error of the loop asks its user to call a producer method.
fn assert_no_way_out_through_the_producer(errors: &[Error]) {
    for e in errors {
        let text = e.to_string();
        assert!(
            !text.contains("call commit_transaction") && !text.contains("call abort_transaction"),
            "{text}"
        );
    }
}

#[test]
fn copies_exactly_once_without_faults() {
    let (world, mut copier) = setup();
    finish_exactly_once(&world, &mut copier, None, 0);
}

/// Holds the loop at `at`, drops the step waiting there, and lets go.
fn drop_held_step(world: &Rc<RefCell<World>>, copier: &mut Copier, at: Waiting) {
    world.borrow_mut().hold(at, true);
    drop_step_at(world, copier, at);
    world.borrow_mut().hold(at, false);
}

/// Copies to the end with no step failing: exactly once (with `first`, a transaction reported
/// before), `aborts` transactions aborted.
fn finish_exactly_once(
    world: &Rc<RefCell<World>>,
    copier: &mut Copier,
    first: Option<CommittedTransaction>,
    aborts: u64,
) {
    let (mut reports, errors) = copy_to_the_end(world, copier);
    assert!(errors.is_empty(), "{errors:?}");
    reports.splice(0..0, first);
    assert_exactly_once(world, &reports);
    assert_eq!(world.borrow().aborts, aborts);
    assert_eq!(copier.counters().transactions_aborted, aborts);
    assert_eq!(
        copier.counters().transactions_committed,
        world.borrow().commits
    );
    let counted = |of: fn(&CommittedTransaction) -> usize| -> u64 {
        reports.iter().map(|t| of(t) as u64).sum()
    };
    let counters = copier.counters();
    assert_eq!(
        (counters.records_in, counters.records_out),
        (
            counted(CommittedTransaction::records_in),
            counted(CommittedTransaction::records_out)
        ),
        "the counters add up the committed transactions"
    );
}

/// With `call` unreachable, `steps` steps fail with a retriable error, and after the first
/// (which reads the transaction) none reads anything; returns their errors, the coordinator
/// back.
fn steps_wait_for(
    world: &Rc<RefCell<World>>,
    copier: &mut Copier,
    call: Call,
    steps: usize,
) -> Vec<Error> {
    world.borrow_mut().hold(Waiting::Coordinator(call), true);
    let mut positions = None;
    let mut errors = Vec::new();
    for _ in 0..steps {
        errors.push(run(copier.step()).expect_err("the call cannot finish"));
        // Nothing is read while the transaction has no outcome.
        let now = world.borrow().positions.clone();
        assert_eq!(*positions.get_or_insert_with(|| now.clone()), now);
    }
    world.borrow_mut().hold(Waiting::Coordinator(call), false);
    for e in &errors {
        assert!(e.is_retriable() && matches!(e, Error::Timeout(_)), "{e}");
    }
    assert_no_way_out_through_the_producer(&errors);
    errors
}

#[test]
fn dropped_while_polling_loses_nothing() {
    let (world, mut copier) = setup();
    drop_held_step(&world, &mut copier, Waiting::Poll);
    assert!(matches!(copier.stage, Stage::Idle));
    finish_exactly_once(&world, &mut copier, None, 0);
}

/// A copier (two partitions of 20 records, 5 a poll, a commit every 6) whose step was
/// dropped while it waited for more records, its transaction open with a poll's records
/// copied into it (nothing being copied).
fn copier_with_an_open_transaction(world: &Rc<RefCell<World>>) -> Copier {
    let mut copy = mirror(Rc::clone(world));
    let (blocking, armed) = (Rc::clone(world), std::cell::Cell::new(true));
    // The first record copied holds the step's next poll.
    let transform: Transform = Box::new(move |record| {
        if armed.replace(false) {
            blocking.borrow_mut().hold(Waiting::Poll, true);
        }
        copy(record)
    });
    let mut copier = CopyLoop::new(
        FakeSource(Rc::clone(world)),
        FakeSink(Rc::clone(world)),
        transform,
    )
    .commit_every(6, Duration::from_millis(100));
    drop_step_at(world, &mut copier, Waiting::Poll);
    world.borrow_mut().hold(Waiting::Poll, false);
    assert!(matches!(&copier.stage, Stage::Open(open) if !open.copies.is_empty()));
    copier
}

/// Such a transaction is left to the next step, which goes on with it: nothing is aborted.
#[test]
fn dropped_polling_with_its_transaction_open_goes_on_with_it() {
    let world = World::new(2, 20, 5);
    let mut copier = copier_with_an_open_transaction(&world);
    finish_exactly_once(&world, &mut copier, None, 0);
}

/// A source log truncated below the position (an unclean leader election, KIP-320) aborts
/// the open transaction and rewinds the partition to where the transaction began reading it,
/// before the divergent offset the consumer moved to: nothing is skipped.
#[test]
fn a_truncated_source_rewinds_to_where_the_transaction_began() {
    let world = World::new(2, 20, 5);
    let mut copier = copier_with_an_open_transaction(&world);
    // The open transaction copied offsets 0..5 of partition 0; the log diverges at 3.
    world.borrow_mut().truncate = Some((0, 3));
    let error = run(copier.step()).expect_err("the truncation is the step's error");
    assert!(matches!(error, Error::LogTruncation { .. }), "{error}");
    assert_eq!(
        world.borrow().positions[&0],
        0,
        "rewound below the divergent offset"
    );
    finish_exactly_once(&world, &mut copier, None, 1);
}

/// A poll whose transaction could not begin is put back: the step fails with the
/// producer's error and nothing of the poll is copied, so the next steps read it again and
/// every record is copied once.
#[test]
fn a_poll_whose_transaction_could_not_begin_is_read_again() {
    let (world, mut copier) = setup();
    world.borrow_mut().refuse_begin = Some(Error::InvalidState("not now".into()));
    let error = run(copier.step()).expect_err("begin refused");
    assert!(matches!(error, Error::InvalidState(_)), "{error}");
    assert_eq!(
        world.borrow().positions.values().sum::<i64>(),
        0,
        "put back"
    );
    finish_exactly_once(&world, &mut copier, None, 0);
}

/// An abort refused because another producer took the transactional id ends the step with
/// that fatal error, not with the error that made the loop abort: the application must learn
/// that this copier is done, or it would step again into the same refusal.
#[test]
fn a_fenced_abort_is_the_steps_fatal_error() {
    let world = World::new(2, 20, 5);
    let mut copier = copier_with_an_open_transaction(&world);
    world.borrow_mut().truncate = Some((0, 3));
    world.borrow_mut().fence_at = Some(Call::Abort);
    let error = run(copier.step()).expect_err("the abort was fenced");
    assert!(error.is_fatal(), "{error}");
    assert_eq!(error.code(), Some(crate::ErrorCode::PRODUCER_FENCED));
    assert_eq!(world.borrow().aborts, 0);
}

/// `CopyLoop::commit` commits the open transaction at once, and with none open does nothing.
#[test]
fn commit_ends_the_open_transaction_now() {
    let world = World::new(2, 20, 5);
    let mut copier = copier_with_an_open_transaction(&world);
    let open = format!("{copier:?}");
    assert!(
        open.contains("stage: Open {") && open.contains("records: 5"),
        "{open}"
    );
    let committed = run(copier.commit()).expect("commit").expect("committed");
    assert_eq!(committed.records_in(), 5);
    assert_eq!(world.borrow().commits, 1);
    assert!(run(copier.commit()).expect("nothing to commit").is_none());
    assert_eq!(world.borrow().commits, 1);
    let shown = format!("{copier:?}");
    assert!(
        shown.starts_with("CopyLoop") && shown.contains("commit_records: 6"),
        "{shown}"
    );
    finish_exactly_once(&world, &mut copier, Some(committed), 0);
}

#[test]
fn dropped_in_the_transform_aborts_and_rewinds() {
    let (world, mut copier) = setup();
    drop_held_step(&world, &mut copier, Waiting::Transform);
    finish_exactly_once(&world, &mut copier, None, 1);
}

#[test]
fn dropped_in_a_send_aborts_and_rewinds() {
    let (world, mut copier) = setup();
    drop_held_step(&world, &mut copier, Waiting::Send);
    finish_exactly_once(&world, &mut copier, None, 1);
}

#[test]
fn dropped_in_the_generation_hold_sends_the_offsets_next_step() {
    let (world, mut copier) = setup();
    drop_held_step(&world, &mut copier, Waiting::Hold);
    assert!(matches!(&copier.stage, Stage::Ending(e) if e.step == EndStep::SendOffsets));
    let positions = world.borrow().positions.clone();
    // The next step ends that transaction first and reports it, before reading more.
    let first = run(copier.step()).expect("resolved").expect("committed");
    assert_eq!(world.borrow().positions, positions);
    finish_exactly_once(&world, &mut copier, Some(first), 0);
}

#[test]
fn dropped_in_send_offsets_sends_them_again() {
    let (world, mut copier) = setup();
    drop_held_step(&world, &mut copier, Waiting::Coordinator(Call::SendOffsets));
    finish_exactly_once(&world, &mut copier, None, 0);
}

#[test]
fn dropped_in_the_commit_commits_again() {
    let (world, mut copier) = setup();
    world
        .borrow_mut()
        .hold(Waiting::Coordinator(Call::Commit), true);
    drop_step_at(&world, &mut copier, Waiting::Coordinator(Call::Commit));
    // Only commit is valid now (T4); the loop's stage says so.
    assert!(matches!(&copier.stage, Stage::Ending(e) if e.step == EndStep::Commit));
    world
        .borrow_mut()
        .hold(Waiting::Coordinator(Call::Commit), false);
    finish_exactly_once(&world, &mut copier, None, 0);
}

#[test]
fn dropped_in_the_abort_aborts_again() {
    let (world, mut copier) = setup();
    drop_held_step(&world, &mut copier, Waiting::Transform);
    // The next step aborts the half-copied transaction; it is dropped inside the abort.
    world
        .borrow_mut()
        .hold(Waiting::Coordinator(Call::Abort), true);
    drop_step_at(&world, &mut copier, Waiting::Coordinator(Call::Abort));
    assert!(matches!(&copier.stage, Stage::Ending(e) if e.step == EndStep::Abort));
    world
        .borrow_mut()
        .hold(Waiting::Coordinator(Call::Abort), false);
    finish_exactly_once(&world, &mut copier, None, 1);
}

#[test]
fn dropped_while_reading_the_deliveries_reports_next_step() {
    let (world, mut copier) = setup();
    world.borrow_mut().deliveries_held = true;
    {
        let mut step = pin!(copier.step());
        for _ in 0..20 {
            assert!(poll_once(step.as_mut()).is_pending());
            if world.borrow().commits == 1 {
                break;
            }
        }
        assert_eq!(world.borrow().commits, 1, "the commit never landed");
    }
    assert!(matches!(&copier.stage, Stage::Ending(e) if e.step == EndStep::Report));
    world.borrow_mut().release_deliveries();
    let first = run(copier.step()).expect("resolved").expect("the report");
    assert_eq!(first.records_in(), 10);
    finish_exactly_once(&world, &mut copier, Some(first), 0);
}

#[test]
fn a_commit_timing_out_is_committed_again_at_each_step() {
    let (world, mut copier) = setup();
    steps_wait_for(&world, &mut copier, Call::Commit, 4);
    let first = run(copier.step())
        .expect("the commit's outcome")
        .expect("committed");
    finish_exactly_once(&world, &mut copier, Some(first), 0);
}

#[test]
fn an_abort_timing_out_is_aborted_again_at_each_step() {
    let (world, mut copier) = setup();
    drop_held_step(&world, &mut copier, Waiting::Transform);
    steps_wait_for(&world, &mut copier, Call::Abort, 3);
    finish_exactly_once(&world, &mut copier, None, 1);
}

#[test]
fn offsets_timing_out_are_sent_again_at_each_step() {
    let (world, mut copier) = setup();
    steps_wait_for(&world, &mut copier, Call::SendOffsets, 3);
    finish_exactly_once(&world, &mut copier, None, 0);
}

/// The way out the loop's errors once named, taken anyway: the loop's commit timed out, and
/// its user called commit on the producer by hand, which took the outcome. The loop finds its
/// own commit landed (its offsets were in it) and reports it: nothing lost, nothing twice.
/// A commit refused because another producer took the transactional id ends the step with
/// that fatal error: the loop neither aborts (the producer can no longer) nor reads on.
#[test]
fn a_fenced_commit_is_the_steps_fatal_error() {
    let (world, mut copier) = setup();
    world.borrow_mut().fence_at = Some(Call::Commit);
    let mut outcome = Ok(None);
    for _ in 0..10 {
        outcome = run(copier.step());
        if outcome.is_err() {
            break;
        }
    }
    let error = outcome.expect_err("the commit was fenced");
    assert!(error.is_fatal(), "{error}");
    assert_eq!(error.code(), Some(crate::ErrorCode::PRODUCER_FENCED));
    assert_eq!(world.borrow().commits, 0);
    assert!(world.borrow().destination.values().all(Vec::is_empty));
}

#[test]
fn a_commit_finished_by_hand_is_reported_once() {
    let (world, mut copier) = setup();
    steps_wait_for(&world, &mut copier, Call::Commit, 1);
    run(copier.producer().commit_transaction()).expect("committed by hand");
    let first = run(copier.step())
        .expect("resolved")
        .expect("the loop's commit");
    finish_exactly_once(&world, &mut copier, Some(first), 0);
}

/// `CopyLoop::commit` finishes a commit a step left without an outcome and reports its
/// transaction; with nothing open after that, it reports none.
#[test]
fn commit_finishes_a_commit_left_without_outcome() {
    let (world, mut copier) = setup();
    steps_wait_for(&world, &mut copier, Call::Commit, 1);
    let first = run(copier.commit())
        .expect("committed")
        .expect("the transaction the step left");
    assert!(run(copier.commit()).expect("nothing to end").is_none());
    finish_exactly_once(&world, &mut copier, Some(first), 0);
}

/// The loop's transaction, whose offsets could not be sent, committed by hand: its output is
/// visible and its offsets are not. The loop notices and rewinds instead of committing
/// offsets past input it no longer holds: every record is in the destination (some twice,
/// the price of the commit by hand), none missing.
#[test]
fn a_transaction_committed_behind_the_loops_back_is_rewound_not_skipped() {
    let (world, mut copier) = setup();
    steps_wait_for(&world, &mut copier, Call::SendOffsets, 1);
    run(copier.producer().commit_transaction()).expect("committed by hand");
    let noticed = run(copier.step()).expect_err("noticed");
    assert!(matches!(noticed, Error::InvalidState(_)), "{noticed}");
    assert!(noticed.to_string().contains("behind its back"), "{noticed}");
    let (_, errors) = copy_to_the_end(&world, &mut copier);
    assert!(errors.is_empty(), "{errors:?}");
    let world = world.borrow();
    for (p, expected) in world.expected() {
        let copied = &world.destination[&p];
        for value in &expected {
            assert!(copied.contains(value), "{value:?} missing");
        }
    }
}

/// A transaction begun on the producer behind the loop's back between steps is aborted by
/// the next step (the loop owns its producer's transactions), which says so and goes on.
#[test]
fn a_transaction_begun_behind_the_loops_back_is_aborted() {
    let (world, mut copier) = setup();
    let first = run(copier.step()).expect("a step").expect("a commit");
    world.borrow_mut().begin().expect("begun by hand");
    let noticed = run(copier.step()).expect_err("noticed");
    assert!(noticed.to_string().contains("behind its back"), "{noticed}");
    assert_eq!(world.borrow().aborts, 1);
    finish_exactly_once(&world, &mut copier, Some(first), 1);
}

/// One step copying all 40 records of a 2-partition source that then runs dry, committing
/// every 1,000 records or 1 s (early once caught up when `early`); every record once. Returns
/// the fake clock's time at the commit, in ms.
fn caught_up_commit_time(early: bool) -> u64 {
    let world = World::new(2, 20, 5);
    let mut copier = CopyLoop::new(
        FakeSource(Rc::clone(&world)),
        FakeSink(Rc::clone(&world)),
        mirror(Rc::clone(&world)),
    )
    .commit_every(1_000, Duration::from_secs(1))
    .commit_when_caught_up(early);
    let committed = run(copier.step())
        .expect("the step commits")
        .expect("a transaction");
    assert_eq!(committed.records_in(), 40);
    assert_eq!(committed.records_out(), 40, "one copy each");
    assert_exactly_once(&world, &[committed]);
    world.borrow().now
}

/// Once the input runs dry the open transaction commits after a tenth of the interval, not
/// at its end: the copier's output is not held back by a transaction waiting for input that
/// is not there.
#[test]
fn a_caught_up_source_commits_before_the_interval() {
    let now = caught_up_commit_time(true);
    assert!(
        (100..1_000).contains(&now),
        "committed at {now} ms: the linger is 100 ms of the 1 s interval"
    );
}

/// With early commits off, a caught-up source's transaction waits out the whole interval.
#[test]
fn a_caught_up_source_holds_the_transaction_when_told_to() {
    let now = caught_up_commit_time(false);
    // The 40 records take 8 polls of 1 ms: the wait for more is what is left of the
    // interval, so the commit comes at its end, not a wait's length past it.
    assert!(
        (1_000..1_008).contains(&now),
        "committed at {now} ms, not at the end of the 1 s interval"
    );
}

/// At most `transform_concurrency` transforms run at once (each here waits one turn before it
/// finishes, so a poll's five records would all run together without the bound).
#[test]
fn transforms_run_at_most_the_concurrency_at_once() {
    let world = World::new(2, 20, 5);
    let (running, most) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let (counted, highest) = (Rc::clone(&running), Rc::clone(&most));
    let transform: Transform = Box::new(move |record: crate::ConsumerRecord| {
        let (running, most) = (Rc::clone(&counted), Rc::clone(&highest));
        Box::pin(async move {
            running.set(running.get() + 1);
            most.set(most.get().max(running.get()));
            let mut waited = false;
            std::future::poll_fn(|context| {
                if std::mem::replace(&mut waited, true) {
                    return Poll::Ready(());
                }
                context.waker().wake_by_ref();
                Poll::Pending
            })
            .await;
            running.set(running.get() - 1);
            vec![
                crate::Record::to(DESTINATION)
                    .partition(record.partition)
                    .value(record.value.unwrap_or_default()),
            ]
        })
    });
    let mut copier = CopyLoop::new(
        FakeSource(Rc::clone(&world)),
        FakeSink(Rc::clone(&world)),
        transform,
    )
    .commit_every(6, Duration::from_millis(100))
    .transform_concurrency(3);
    finish_exactly_once(&world, &mut copier, None, 0);
    assert_eq!(most.get(), 3);
}
