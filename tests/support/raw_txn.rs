//! A transactional producer written with raw wire calls, for the transaction-doctor tests: it
//! can do what no correct client does, write a transactional batch to a partition the
//! transaction coordinator was never told about (no AddPartitionsToTxn), which is how a
//! hanging transaction is made on purpose (KAFKA-12671's shape, KIP-664).
//!
//! Requests and responses are `kafka-protocol`'s generated messages over a blocking socket,
//! independent of the crate's client code; the record batch is the crate's own builder.

use std::time::{Duration, Instant};

use exactly::__private::protocol::record_batch::BatchBuilder;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use super::raw::RawConnection;

/// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: ask again.
const COORDINATOR_RETRIABLE: [i16; 3] = [14, 15, 16];

/// A producer id and epoch the transaction coordinator handed out for a transactional id,
/// used for hand-written transactional batches.
pub struct RawTransactionalProducer {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id.
    pub producer_id: i64,
    /// The epoch.
    pub producer_epoch: i16,
    broker: RawConnection,
}

impl RawTransactionalProducer {
    /// Registers `transactional_id` (FindCoordinator, InitProducerId) through `bootstrap`, a
    /// single-broker cluster's address, with a transaction timeout of `timeout`.
    pub fn init(bootstrap: &str, transactional_id: &str, timeout: Duration) -> Self {
        let mut broker = RawConnection::connect(bootstrap);
        let deadline = Instant::now() + Duration::from_secs(60);
        let find = FindCoordinatorRequest::default()
            .with_key_type(1)
            .with_coordinator_keys(vec![StrBytes::from_string(transactional_id.to_owned())]);
        loop {
            let answer: FindCoordinatorResponse =
                broker.call_generated(ApiKey::FindCoordinator, 4, &find);
            let code = answer.coordinators[0].error_code;
            if code == 0 {
                break;
            }
            assert!(
                COORDINATOR_RETRIABLE.contains(&code) && Instant::now() < deadline,
                "FindCoordinator for {transactional_id}: error {code}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let init = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_string(
                transactional_id.to_owned(),
            ))))
            .with_transaction_timeout_ms(timeout.as_millis() as i32)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        loop {
            let answer: InitProducerIdResponse =
                broker.call_generated(ApiKey::InitProducerId, 4, &init);
            if answer.error_code == 0 {
                return Self {
                    transactional_id: transactional_id.to_owned(),
                    producer_id: answer.producer_id.0,
                    producer_epoch: answer.producer_epoch,
                    broker,
                };
            }
            assert!(
                COORDINATOR_RETRIABLE.contains(&answer.error_code) && Instant::now() < deadline,
                "InitProducerId for {transactional_id}: error {}",
                answer.error_code
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Writes `values` as one transactional batch (sequence `base_sequence`) to
    /// `topic`-`partition`, without telling the coordinator: the broker's answer's error code
    /// and base offset.
    pub fn produce_unregistered(
        &mut self,
        topic: &str,
        partition: i32,
        base_sequence: i32,
        values: &[&str],
    ) -> (i16, i64) {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis() as i64;
        let mut builder = BatchBuilder::new(now_ms, 1024);
        for value in values {
            builder.append(now_ms, None, Some(value.as_bytes()), &[]);
        }
        let mut batch = builder.seal(true);
        batch.stamp(self.producer_id, self.producer_epoch, base_sequence);
        let request = ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_string(
                self.transactional_id.clone(),
            ))))
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(partition)
                            .with_records(Some(batch.to_bytes())),
                    ]),
            ]);
        let answer: ProduceResponse = self.broker.call_generated(ApiKey::Produce, 9, &request);
        let partition = &answer.responses[0].partition_responses[0];
        (partition.error_code, partition.base_offset)
    }
}
