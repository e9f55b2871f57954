use super::*;

/// A `Producer` is shared across tasks and threads, and the futures of its calls can be
/// spawned on a multi-thread runtime. Checked by the compiler: the function is never run.
#[test]
fn the_producer_and_its_futures_are_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>(_: T) {}
    fn futures_of(producer: &Producer) {
        send(producer.send(Record::to("t")));
        send(producer.flush());
        send(producer.wait_ready(Duration::from_secs(1)));
        send(producer.close_with_timeout(Duration::from_secs(1)));
        send(producer.commit_transaction());
        send(producer.abort_transaction());
    }
    send_sync::<Producer>();
    send_sync::<DeliveryFuture>();
    let _ = futures_of as fn(&Producer);
}

#[test]
fn topic_names_follow_kafka_rules() {
    assert!(validate_topic("orders.v1_x-2").is_ok());
    for bad in ["", ".", "..", "has space", "ümlaut", &"x".repeat(250)] {
        assert!(
            matches!(validate_topic(bad), Err(Error::InvalidTopic { .. })),
            "{bad:?}"
        );
    }
}
