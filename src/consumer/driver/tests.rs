use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use crate::consumer::membership::{MembershipRequest, MembershipResponse};
use crate::net::metadata::ClusterMetadata;
use crate::net::ready::bootstrap_links;
use crate::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatResponse;

/// A KIP-848 consumer of group `g` subscribed to `t`, past its first `poll`, with no
/// broker behind it: the background task's side is played by the test.
fn handle() -> Handle {
    let config = ConsumerConfig {
        group_id: "g".into(),
        client_id: "hold-test".into(),
        bootstrap_servers: vec!["127.0.0.1:9".into()],
        ..ConsumerConfig::default()
    };
    let links = bootstrap_links(
        &config.client_id,
        config.request_timeout(),
        (Duration::from_millis(50), Duration::from_millis(50)),
        &config.security,
        &config.bootstrap_servers,
    )
    .unwrap();
    let observer = observer_of(&config, None);
    let clock = MonotonicClock::start();
    let mut state = ConsumerState::new(config, links, ClusterMetadata::default(), true, 0);
    state.subscribe(vec!["t".into()]).unwrap();
    state.begin_poll(0).unwrap();
    state.end_poll(0);
    Handle {
        shared: Arc::new(Shared {
            state: Mutex::new(state),
            clock,
            changed: Notify::new(),
            wake: Notify::new(),
            observer,
        }),
    }
}

/// The coordinator's answer to a heartbeat: `epoch`, and a 1 ms interval, so the next
/// heartbeat is due at once.
fn answered(epoch: i32) -> Completion {
    Completion::Membership(Ok(MembershipResponse::ConsumerHeartbeat(
        ConsumerGroupHeartbeatResponse {
            member_id: Some("m".into()),
            member_epoch: epoch,
            heartbeat_interval_ms: 1,
            ..Default::default()
        },
    )))
}

/// The background task's turn, as far as the membership goes: starts the heartbeat that
/// is due, if any (under the lock, as `ConsumerState::maintain` does).
fn start_heartbeat(shared: &Shared) -> Option<MembershipRequest> {
    let mut state = shared.lock();
    let now = shared.clock.now();
    state.start_membership_request(now)
}

fn answer_heartbeat(shared: &Shared, epoch: i32) {
    let mut state = shared.lock();
    let now = shared.clock.now();
    state.complete(answered(epoch), now);
    drop(state);
    shared.changed.notify_one();
}

/// While a heartbeat is in flight no hold is taken; once it is answered the hold is
/// taken with its epoch, and no heartbeat starts while the hold lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_waits_for_the_heartbeat_in_flight_and_keeps_the_next_one_back() {
    let handle = handle();
    let shared = &handle.shared;
    assert!(start_heartbeat(shared).is_some(), "the join goes out");
    answer_heartbeat(shared, 1);
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(start_heartbeat(shared).is_some(), "a heartbeat is due");
    assert!(shared.lock().try_hold(shared.clock.now()).is_none());
    let deadline = Instant::now() + Duration::from_secs(10);
    let waiting = tokio::spawn({
        let handle = handle.clone();
        async move { handle.hold_generation(deadline).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "no hold while the heartbeat flies");
    answer_heartbeat(shared, 2);
    let hold = waiting.await.unwrap();
    assert_eq!(hold.metadata().generation_id, 2);
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(start_heartbeat(shared).is_none(), "held: no heartbeat");
    drop(hold);
    assert!(
        start_heartbeat(shared).is_some(),
        "released: the heartbeat goes"
    );
}

/// No heartbeat can start between the check that none is in flight and the hold: a
/// thread plays the background task, starting a heartbeat whenever one is due (every
/// millisecond) and answering it with the next epoch, while holds are taken over and over.
/// Every hold must find nothing in flight and keep the epoch it was given. (With the
/// check and the hold under two lock acquisitions, a heartbeat started in between made
/// the hold's epoch stale at once.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_heartbeat_starts_between_the_check_and_the_hold() {
    let handle = handle();
    let stop = Arc::new(AtomicBool::new(false));
    let background = std::thread::spawn({
        let shared = Arc::clone(&handle.shared);
        let stop = Arc::clone(&stop);
        move || {
            let mut epoch = 0;
            let mut started = 0u32;
            while !stop.load(Ordering::Relaxed) {
                if start_heartbeat(&shared).is_some() {
                    started += 1;
                    std::thread::yield_now();
                    epoch += 1;
                    answer_heartbeat(&shared, epoch);
                }
                std::thread::yield_now();
            }
            started
        }
    });
    let began = Instant::now();
    let mut holds = 0;
    while holds < 2_000 && began.elapsed() < Duration::from_secs(60) {
        let hold = handle
            .hold_generation(Instant::now() + Duration::from_secs(10))
            .await;
        {
            let state = handle.shared.lock();
            assert!(
                !state.generation_moving(),
                "hold {holds}: a heartbeat is in flight under the hold"
            );
            assert_eq!(
                *hold.metadata(),
                state.membership().group_metadata(),
                "hold {holds}: the epoch moved under the hold"
            );
        }
        drop(hold);
        holds += 1;
        // Let the background thread start heartbeats between the holds.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let started = background.join().unwrap();
    assert_eq!(holds, 2_000, "holds taken within the bound");
    assert!(
        started > 100,
        "the background started only {started} heartbeats"
    );
}

/// The end of a `poll` (returned or dropped) wakes the background task, so the
/// `max.poll.interval.ms` timer starts then, whatever else it waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_a_poll_wakes_the_background_task() {
    let handle = handle();
    let polling = tokio::spawn({
        let handle = handle.clone();
        async move { handle.poll(None, 1).await }
    });
    // The poll began (it wakes the task to send what it may have given up) ...
    tokio::time::timeout(Duration::from_secs(5), handle.shared.wake.notified())
        .await
        .expect("the poll's start wakes the background task");
    assert_eq!(
        handle.shared.lock().next_wake(0),
        1_000,
        "no budget timer yet"
    );
    // ... and ends: dropped, as a `poll_timeout` that passed drops its future.
    polling.abort();
    assert!(polling.await.is_err_and(|e| e.is_cancelled()));
    tokio::time::timeout(Duration::from_secs(5), handle.shared.wake.notified())
        .await
        .expect("the poll's end wakes the background task");
    let now = handle.shared.clock.now();
    let budget_ends = handle.shared.lock().next_wake(now);
    assert!(
        (now + 290_000..=now + 300_000).contains(&budget_ends),
        "the budget timer: {budget_ends} (now {now})"
    );
}
