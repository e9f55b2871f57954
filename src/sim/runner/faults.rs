//! The producer run's faults: the recurring kinds drawn at their mean intervals, and how a
//! fault, drawn or scripted, changes the model cluster, the network or the clock.

use super::{CLIENT, Pending, Run};
use crate::sim::faults::{Fault, FaultRates};
use crate::types::{Millis, TopicPartition};

/// Spontaneous faults, each recurring at its own mean interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recurring {
    Reset,
    MoveLeader,
    Crash,
    Expire,
    Retention,
    Jump,
}

impl Recurring {
    pub(super) const ALL: [Recurring; 6] = [
        Recurring::Reset,
        Recurring::MoveLeader,
        Recurring::Crash,
        Recurring::Expire,
        Recurring::Retention,
        Recurring::Jump,
    ];

    fn interval(self, rates: &FaultRates) -> Millis {
        match self {
            Recurring::Reset => rates.reset_every_ms,
            Recurring::MoveLeader => rates.move_leader_every_ms,
            Recurring::Crash => rates.crash_every_ms,
            Recurring::Expire => rates.expire_every_ms,
            Recurring::Retention => rates.retention_every_ms,
            Recurring::Jump => rates.jump_every_ms,
        }
    }
}

impl Run {
    /// Schedules the next draw of a recurring kind (never, if its interval is 0).
    pub(super) fn schedule_recurring(&mut self, kind: Recurring) {
        let interval = kind.interval(&self.rates);
        if interval > 0 {
            let at = self.now + self.entropy.range(1, 2 * interval);
            self.schedule(at, Pending::Recur(kind));
        }
    }

    /// Draws the next fault of a recurring kind and applies it.
    pub(super) fn recur(&mut self, kind: Recurring) {
        let brokers = self.cluster.config().brokers.clone();
        let partitions: Vec<TopicPartition> = self.cluster.partitions().keys().cloned().collect();
        let fault = match kind {
            Recurring::Reset => {
                let open = self.network.open_brokers(CLIENT);
                self.entropy
                    .pick(&open)
                    .map(|&broker| Fault::ResetConnection { broker })
            }
            Recurring::MoveLeader
                if self.cluster.coordinator().is_some() && self.entropy.chance(300) =>
            {
                let live = self.cluster.live_brokers();
                let group = self.entropy.chance(500);
                self.entropy
                    .pick(&live)
                    .map(|&to| Fault::MoveCoordinator { group, to })
            }
            Recurring::MoveLeader => {
                let live = self.cluster.live_brokers();
                let partition = self.entropy.pick(&partitions).cloned();
                let to = self.entropy.pick(&live).copied();
                partition
                    .zip(to)
                    .map(|(partition, to)| Fault::MoveLeader { partition, to })
            }
            Recurring::Crash => {
                let broker = self.entropy.pick(&brokers).copied();
                if let Some(broker) = broker {
                    let up_at = self.now + self.entropy.range(1, self.rates.crash_max_ms);
                    self.schedule(up_at, Pending::Fault(Fault::BrokerUp { broker }));
                    if self.entropy.chance(500) {
                        let elect_at = self.now + self.entropy.range(10, 500);
                        self.schedule(elect_at, Pending::Fault(Fault::ElectLeaders));
                    }
                }
                broker.map(|broker| Fault::BrokerDown { broker })
            }
            Recurring::Expire => Some(Fault::ExpireProducerState),
            Recurring::Retention => self
                .entropy
                .pick(&partitions)
                .cloned()
                .map(|partition| Fault::AdvanceLogStart { partition }),
            Recurring::Jump => Some(Fault::ClockJump {
                ms: self.entropy.range(1, self.rates.jump_max_ms),
            }),
        };
        if let Some(fault) = fault {
            self.apply(fault);
        }
    }

    /// Applies `fault` now.
    pub(super) fn apply(&mut self, fault: Fault) {
        self.note(format!("fault: {fault:?}"));
        match fault {
            Fault::BrokerDown { broker } => {
                self.stats.fault("broker crash");
                self.cluster.set_up(broker, false);
                if let Some(connection) = self.network.current(CLIENT, broker) {
                    self.close(connection, true);
                }
            }
            Fault::BrokerUp { broker } => self.cluster.set_up(broker, true),
            Fault::ElectLeaders => {
                let live = self.cluster.live_brokers();
                for (tp, leader) in self.cluster.leaders() {
                    if !self.cluster.is_up(leader)
                        && let Some(&to) = self.entropy.pick(&live)
                    {
                        self.stats.fault("leader elected");
                        self.cluster.move_leader(&tp, to);
                    }
                }
            }
            Fault::MoveLeader { partition, to } => {
                self.stats.fault("leader moved");
                self.cluster.move_leader(&partition, to);
            }
            Fault::ResetConnection { broker } => {
                if let Some(connection) = self.network.current(CLIENT, broker) {
                    self.stats.fault("connection reset");
                    self.close(connection, false);
                }
            }
            Fault::ExpireProducerState => {
                let expired = self.cluster.expire_producers(self.now);
                if expired > 0 {
                    self.stats.fault("producer state expired");
                    self.note(format!("{expired} producer states expired"));
                }
            }
            Fault::AdvanceLogStart { partition } => {
                let records = usize::try_from(self.entropy.range(1, 100)).unwrap_or(1);
                let start = self
                    .cluster
                    .advance_log_start(&partition, records, self.now);
                self.stats.fault("retention");
                self.note(format!("{partition:?} log start now {start:?}"));
            }
            Fault::ClockJump { ms } => {
                self.stats.fault("clock jump");
                self.checker.on_jump(self.now, ms);
                self.now += ms;
            }
            Fault::BlackholeResponses { broker } => {
                self.blackholed.insert(broker);
            }
            Fault::HealResponses { broker } => {
                self.blackholed.remove(&broker);
            }
            Fault::SlowNetwork { broker, extra_ms } => {
                self.slow.insert(broker, extra_ms);
            }
            Fault::MoveCoordinator { group, to } => {
                self.stats.fault("coordinator moved");
                self.cluster.move_coordinator(group, to);
            }
            Fault::ZombieInit => {
                if let Some(identity) = self.cluster.fence_transactional_id(self.now) {
                    self.stats.fault("fenced by another instance");
                    self.note(format!("another instance initialised: {identity:?}"));
                    if let Some(driver) = &mut self.txn {
                        driver.on_fence(self.now);
                    }
                }
            }
        }
    }
}
