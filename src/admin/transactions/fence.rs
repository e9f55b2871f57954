//! Fencing transactional ids (KIP-618's `fenceProducers`): InitProducerId with the id, as a
//! new producer's `init_transactions` would send it. The coordinator bumps the id's epoch,
//! so the producer that held it is fenced (PRODUCER_FENCED on its next request), and aborts
//! its open transaction on every partition at once: the safe way to end a live transaction
//! whose producer is gone, where an abort on one partition would break its atomicity.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::{InitProducerIdRequest, ProducerId, TransactionalId};
use tokio::time::Instant;

use super::super::{Admin, CoordinatorAnswer, CoordinatorKind, coordinator_error};
use crate::error::{Error, Result};
use crate::protocol::error_code::ErrorCode;
use crate::protocol::generated::str_bytes;
use crate::protocol::messages::init_producer_id::InitProducerIdResponse;

/// The transaction timeout the fencing InitProducerId registers: Kafka's default
/// `transaction.timeout.ms`, within every broker's `transaction.max.timeout.ms`. No
/// transaction is begun under it.
const FENCING_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// The identity a fenced transactional id holds afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FencedProducer {
    /// The producer id.
    pub producer_id: i64,
    /// The new epoch: every producer of the id with an older one is fenced.
    pub producer_epoch: i16,
}

impl CoordinatorAnswer for InitProducerIdResponse {
    fn coordinator_error(&self) -> Option<ErrorCode> {
        coordinator_error([self.error_code])
    }
}

impl Admin {
    /// Fences each transactional id: its current producer can no longer write or commit,
    /// and the transaction it had open is aborted by its coordinator on every partition (the
    /// partitions' last stable offsets move on). One result per id: the identity the id now
    /// holds, or the error (TRANSACTIONAL_ID_AUTHORIZATION_FAILED without WRITE on it).
    /// While the coordinator is still aborting it answers CONCURRENT_TRANSACTIONS, and the
    /// request is sent again within the call's deadline.
    pub async fn fence_producers(
        &self,
        transactional_ids: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<BTreeMap<String, Result<FencedProducer>>> {
        self.per_transactional_id("fence producers", transactional_ids, async |id| {
            self.fence(id).await
        })
        .await
    }

    async fn fence(&self, id: &str) -> Result<FencedProducer> {
        let timeout_ms = i32::try_from(FENCING_TRANSACTION_TIMEOUT.as_millis()).unwrap_or(i32::MAX);
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(str_bytes(id))))
            .with_transaction_timeout_ms(timeout_ms)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let deadline = self.deadline();
        loop {
            let response = self
                .call_coordinator(CoordinatorKind::Transaction, id, request.clone())
                .await?;
            match ErrorCode(response.error_code) {
                ErrorCode::NONE => {
                    return Ok(FencedProducer {
                        producer_id: response.producer_id,
                        producer_epoch: response.producer_epoch,
                    });
                }
                // The coordinator is writing the aborts of the fenced transaction.
                ErrorCode::CONCURRENT_TRANSACTIONS if Instant::now() < deadline => {
                    tokio::time::sleep(self.shared.config.retry_backoff()).await;
                }
                code => return Err(Error::broker(code)),
            }
        }
    }
}
