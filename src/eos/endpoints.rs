//! What the copy loop reads from and writes to, as traits: [`Consumer`] and [`Producer`]
//! implement them, and so does the crate's deterministic simulation (feature `sim`), which
//! drives the real [`super::CopyLoop`] against its model cluster and group coordinator on
//! virtual time. The traits live in a private module: nothing outside the crate can name or
//! implement them, so the loop's public API is only ever used with the real consumer and
//! producer.

use std::future::Future;
use std::time::Duration;

use crate::producer::TxnLedger;
use crate::types::Millis;
use crate::{
    Consumer, ConsumerEvent, ConsumerGroupMetadata, DeliveryFuture, Error, GenerationHold,
    OffsetToCommit, Producer, Record, Result, TopicPartition,
};

/// The read side: a consumer in a group (see [`Consumer`] for each call's contract).
pub trait CopySource {
    /// What [`CopySource::hold_generation`] gives.
    type Hold: CommitHold;

    /// The clock the loop measures its commit interval on, in milliseconds: the one the
    /// source's poll timeout runs on (the consumer's monotonic clock; the simulation's
    /// virtual time), as the engine and the consumer's state machines take it.
    fn now(&self) -> Millis;

    /// [`Consumer::poll_timeout`].
    fn poll_timeout(
        &mut self,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<ConsumerEvent>>>;

    /// [`Consumer::assignment`].
    fn assignment(&self) -> Vec<TopicPartition>;

    /// [`Consumer::seek`].
    fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<()>;

    /// [`Consumer::hold_generation`].
    fn hold_generation(&self) -> impl Future<Output = Self::Hold>;

    /// The `client_id` and `group` the loop's metrics are labelled with.
    fn metric_labels(&self) -> (String, Option<String>);

    /// The records between the positions and the log ends, over the assigned partitions (as
    /// of the latest fetch answers), if the source knows it.
    fn source_lag(&self) -> Option<i64>;

    /// [`Consumer::caught_up`].
    fn caught_up(&self) -> bool;
}

/// A generation held for a transactional offset commit ([`GenerationHold`]); dropping it
/// releases the generation.
pub trait CommitHold {
    /// [`GenerationHold::metadata`].
    fn metadata(&self) -> &ConsumerGroupMetadata;

    /// [`GenerationHold::refused`].
    fn refused(&self, error: &Error) -> bool;
}

/// The write side: a transactional producer (see [`Producer`] for each call's contract).
pub trait CopySink {
    /// [`Producer::begin_transaction`].
    fn begin_transaction(&self) -> Result<()>;

    /// [`Producer::send`].
    fn send(&self, record: Record) -> impl Future<Output = Result<DeliveryFuture>>;

    /// [`Producer::send_offsets_to_transaction`].
    fn send_offsets_to_transaction(
        &self,
        offsets: Vec<OffsetToCommit>,
        group: &ConsumerGroupMetadata,
    ) -> impl Future<Output = Result<()>>;

    /// [`Producer::commit_transaction`].
    fn commit_transaction(&self) -> impl Future<Output = Result<()>>;

    /// [`Producer::abort_transaction`].
    fn abort_transaction(&self) -> impl Future<Output = Result<()>>;

    /// Which transaction the producer is in and how the last one ended (`None` for a
    /// producer without a `transactional.id`).
    fn transaction_ledger(&self) -> Option<TxnLedger>;
}

impl CopySource for Consumer {
    type Hold = GenerationHold;

    fn now(&self) -> Millis {
        self.clock_now()
    }

    async fn poll_timeout(&mut self, timeout: Duration) -> Result<Option<ConsumerEvent>> {
        Consumer::poll_timeout(self, timeout).await
    }

    fn assignment(&self) -> Vec<TopicPartition> {
        Consumer::assignment(self)
    }

    fn seek(&mut self, partition: &TopicPartition, offset: i64) -> Result<()> {
        Consumer::seek(self, partition, offset)
    }

    async fn hold_generation(&self) -> GenerationHold {
        Consumer::hold_generation(self).await
    }

    fn metric_labels(&self) -> (String, Option<String>) {
        self.metric_labels()
    }

    fn source_lag(&self) -> Option<i64> {
        Some(self.metrics().partitions.values().map(|p| p.lag).sum())
    }

    fn caught_up(&self) -> bool {
        Consumer::caught_up(self)
    }
}

impl CommitHold for GenerationHold {
    fn metadata(&self) -> &ConsumerGroupMetadata {
        GenerationHold::metadata(self)
    }

    fn refused(&self, error: &Error) -> bool {
        GenerationHold::refused(self, error)
    }
}

impl CopySink for Producer {
    fn begin_transaction(&self) -> Result<()> {
        Producer::begin_transaction(self)
    }

    async fn send(&self, record: Record) -> Result<DeliveryFuture> {
        Producer::send(self, record).await
    }

    async fn send_offsets_to_transaction(
        &self,
        offsets: Vec<OffsetToCommit>,
        group: &ConsumerGroupMetadata,
    ) -> Result<()> {
        Producer::send_offsets_to_transaction(self, offsets, group).await
    }

    async fn commit_transaction(&self) -> Result<()> {
        Producer::commit_transaction(self).await
    }

    async fn abort_transaction(&self) -> Result<()> {
        Producer::abort_transaction(self).await
    }

    fn transaction_ledger(&self) -> Option<TxnLedger> {
        Producer::transaction_ledger(self)
    }
}
