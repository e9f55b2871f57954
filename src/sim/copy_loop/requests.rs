//! The copy loop's copiers as the interpreter's [`Host`]: each copier's engine talks to the
//! model cluster through its own transaction coordinator state (lent to the cluster for each
//! request, one per transactional id), TxnOffsetCommits are validated by the group
//! coordinator first (a zombie's is fenced; one the group accepts must come from the
//! partition's owner), and the group's committed offsets never move backwards.

use super::world::{Pending, World};
use crate::engine::transaction::{TxnRequest, TxnResponse};
use crate::engine::{Event, PartitionResponse, ProducerIdentity};
use crate::error::Error;
use crate::protocol::error_code::ErrorCode;
use crate::protocol::record_batch::SealedBatch;
use crate::sim::cluster::Cluster;
use crate::sim::interpreter::Host;
use crate::sim::invariants::Violation;
use crate::sim::network::{Address, Body, Network};
use crate::types::CoordinatorKey;
use crate::types::{BrokerId, Millis, TopicPartition};

/// Every copier finds its coordinators, and an idempotent InitProducerId, on broker 1.
const ANY_BROKER: BrokerId = 1;

impl World {
    fn latency(&mut self) -> Millis {
        self.latency.draw(&mut self.entropy).0
    }

    /// Lends the cluster copier `i`'s transaction coordinator state for `f`.
    fn with_coordinator<T>(&mut self, i: usize, f: impl FnOnce(&mut Cluster) -> T) -> T {
        match self.slots.get_mut(i) {
            Some(slot) => self.cluster.with_coordinator(&mut slot.coordinator, f),
            None => f(&mut self.cluster),
        }
    }

    /// A transaction coordinator or group coordinator request from copier `i`.
    fn coordinator_request(
        &mut self,
        i: usize,
        broker: BrokerId,
        body: &TxnRequest,
    ) -> Result<TxnResponse, Violation> {
        let now = self.now;
        if let TxnRequest::TxnOffsetCommit { group, offsets, .. } = body {
            self.group.expire(now);
            let code = self
                .group
                .validate_txn_offset_commit(&group.member_id, group.generation_id);
            if code != ErrorCode::NONE {
                self.report.fenced_commits += 1;
                return Ok(TxnResponse::TxnOffsetCommit(
                    offsets
                        .iter()
                        .map(|o| (o.partition.clone(), code))
                        .collect(),
                ));
            }
            for o in offsets {
                if !self.group.owns(&group.member_id, o.partition.partition) {
                    return Err(format!(
                        "member {} (epoch {}) got a TxnOffsetCommit of {:?} through without owning it",
                        group.member_id, group.generation_id, o.partition
                    ));
                }
            }
            if let Some(c) = self.slots.get_mut(i).and_then(|s| s.coordinator.as_mut()) {
                c.admit_member(group.generation_id, &group.member_id);
            }
        }
        let response = self.with_coordinator(i, |c| c.coordinator_request(broker, body, now));
        let applied = self
            .slots
            .get_mut(i)
            .and_then(|s| s.coordinator.as_mut())
            .map(|c| std::mem::take(&mut c.committed_offsets))
            .unwrap_or_default();
        for (tp, offset) in applied {
            let before = self.committed.get(&tp.partition).copied().unwrap_or(0);
            if offset < before {
                return Err(format!(
                    "the committed offset of {tp:?} moved backwards from {before} to {offset}"
                ));
            }
            self.committed.insert(tp.partition, offset);
            self.note(format!("group offset {tp:?} = {offset}"));
        }
        Ok(response)
    }
}

impl Host for World {
    fn now(&self) -> Millis {
        self.now
    }

    fn note(&mut self, line: String) {
        World::note(self, line);
    }

    fn network(&mut self) -> &mut Network {
        &mut self.network
    }

    fn any_broker(&mut self, _client: usize) -> Option<BrokerId> {
        Some(ANY_BROKER)
    }

    fn send(
        &mut self,
        address: Address,
        broker: Option<BrokerId>,
        body: Body,
    ) -> Result<(), Violation> {
        let mut at = self.now + self.latency();
        let broker = broker.unwrap_or(ANY_BROKER);
        let to_coordinator = matches!(body, Body::Coordinator(_) | Body::FindCoordinator(_));
        if to_coordinator && let Some(end) = self.outage_end(self.now) {
            // Written while the coordinator is out of reach: it gets there once it is back
            // (its client may have given up on it by then, and the answer is thrown away).
            at = at.max(end + self.latency());
            self.note(format!(
                "copier {}.{}: request {} held up by a coordinator outage until {at}",
                address.client, address.incarnation, address.request
            ));
        }
        let at = self.network.write(address, broker, body, at, self.now);
        self.schedule(at, Pending::Arrive(address));
        Ok(())
    }

    fn refresh_metadata(&mut self, client: usize, incarnation: u32) {
        let at = self.now + self.latency();
        self.schedule(
            at,
            Pending::Metadata {
                copier: client,
                incarnation,
            },
        );
    }

    fn disconnect(&mut self, client: usize, _incarnation: u32, broker: BrokerId) {
        let Some(connection) = self.network.current(client, broker) else {
            return;
        };
        let v1 = !self.config.transactions_v2;
        for o in self.network.outstanding(connection) {
            // Under transactions v1 a late EndTxn could end the next transaction: the model
            // drains a closed connection's coordinator requests (as the producer run does).
            if v1 && o.coordinator_request {
                self.network.forget(o.address);
            } else {
                self.network.orphan(o.address);
            }
            self.schedule(self.now, Pending::Failed(o.address));
        }
    }

    fn handle(&mut self, address: Address, event: Event) {
        self.engine_event(address.client, address.incarnation, event);
    }

    fn produce(
        &mut self,
        address: Address,
        broker: BrokerId,
        partition: &TopicPartition,
        batch: &SealedBatch,
    ) -> Result<PartitionResponse, Violation> {
        let now = self.now;
        let bytes = batch.to_bytes();
        let verdict = self.with_coordinator(address.client, |c| {
            c.produce(broker, partition, &bytes, now)
        });
        if let Some(v) = verdict.violation {
            return Err(v);
        }
        self.note(format!(
            "copier {}.{}: produce {partition:?} epoch {} -> {} ({} appended)",
            address.client,
            address.incarnation,
            batch.producer_epoch(),
            verdict.response.error,
            verdict.appended.len()
        ));
        Ok(verdict.response)
    }

    fn init_producer_id(
        &mut self,
        _address: Address,
        _broker: BrokerId,
    ) -> Result<ProducerIdentity, Error> {
        Ok(self.cluster.init_producer_id())
    }

    fn find_coordinator(
        &mut self,
        address: Address,
        key: &CoordinatorKey,
    ) -> Result<BrokerId, Violation> {
        Ok(self
            .with_coordinator(address.client, |c| c.find_coordinator(key))
            .unwrap_or(ANY_BROKER))
    }

    fn coordinator(
        &mut self,
        address: Address,
        broker: BrokerId,
        body: &TxnRequest,
    ) -> Result<TxnResponse, Violation> {
        if self.outage_end(self.now).is_some() {
            // On its way when the outage began: applied, and the answer lost (rule T4: the
            // client learns the outcome only by asking again).
            self.outage_lost.insert(address);
        }
        let response = self.coordinator_request(address.client, broker, body)?;
        self.note(format!(
            "copier {}.{}: {body:?} -> {response:?}",
            address.client, address.incarnation
        ));
        Ok(response)
    }

    /// Lost: the engine's request timeout closes the connection.
    fn answer_lost(&mut self, address: Address, _broker: BrokerId, _connection: usize) -> bool {
        if self.outage_lost.remove(&address) {
            self.note(format!(
                "copier {}.{}: answer to {} lost in a coordinator outage",
                address.client, address.incarnation, address.request
            ));
            return true;
        }
        if !self.entropy.chance(self.config.answer_loss) {
            return false;
        }
        self.note(format!(
            "copier {}.{}: answer to {} lost",
            address.client, address.incarnation, address.request
        ));
        true
    }

    fn answer_latency(&mut self) -> Millis {
        self.latency()
    }

    fn schedule_delivery(&mut self, at: Millis, address: Address) {
        self.schedule(at, Pending::Deliver(address));
    }
}
