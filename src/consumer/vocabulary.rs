//! The consumer's settings that are a choice among names: where a partition without a
//! committed offset starts, how the consumer takes part in its group, and the classic
//! protocol's assignor. Plain data, importing nothing of the consumer, so the sans-I/O cores
//! (the fetcher, the classic member) name them without depending on the configuration that
//! parses them (ARCHITECTURE.md, "Layers").

/// `auto.offset.reset`: where a partition without a committed offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OffsetReset {
    /// `earliest`: the log start offset.
    Earliest,
    /// `latest` (Kafka's default): the end of the log; under read_committed, the last stable
    /// offset.
    #[default]
    Latest,
    /// `none`: a partition without a committed offset is an error.
    None,
}

impl OffsetReset {
    /// Its values under `auto.offset.reset`.
    pub(crate) const NAMES: [(&'static str, OffsetReset); 3] = [
        ("earliest", OffsetReset::Earliest),
        ("latest", OffsetReset::Latest),
        ("none", OffsetReset::None),
    ];
}

/// `group.protocol`: how the consumer takes part in its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum GroupProtocol {
    /// `consumer`: the KIP-848 protocol (ConsumerGroupHeartbeat, server-side assignment),
    /// this crate's default (the Java client's is still `classic` in Kafka 4.1; 4.x brokers
    /// enable KIP-848 and clients opt in). When the broker does not advertise
    /// ConsumerGroupHeartbeat, the consumer falls back to [`GroupProtocol::Classic`].
    #[default]
    Consumer,
    /// `classic`: JoinGroup / SyncGroup / Heartbeat with a client-side assignor.
    Classic,
}

/// `partition.assignment.strategy`: the client-side assignor (and rebalance protocol) of the
/// classic group protocol; KIP-848 groups assign on the broker (`group.remote.assignor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AssignmentStrategy {
    /// `cooperative-sticky` (KIP-429): members keep the partitions that do not move across a
    /// rebalance and give up only those that do, in two rebalances. The default: the Java
    /// 4.x consumer's default list (`range, cooperative-sticky`) upgrades to it once every
    /// member supports it, and keeping partitions means no fetch gap for them.
    #[default]
    CooperativeSticky,
    /// `range` with the eager protocol: every rebalance revokes everything first.
    Range,
}

impl AssignmentStrategy {
    /// Its values under `partition.assignment.strategy` (names, and Java's class names).
    pub(crate) const NAMES: [(&'static str, AssignmentStrategy); 4] = [
        ("cooperative-sticky", AssignmentStrategy::CooperativeSticky),
        (
            "cooperativestickyassignor",
            AssignmentStrategy::CooperativeSticky,
        ),
        ("range", AssignmentStrategy::Range),
        ("rangeassignor", AssignmentStrategy::Range),
    ];
}

impl GroupProtocol {
    /// Its values under `group.protocol`.
    pub(crate) const NAMES: [(&'static str, GroupProtocol); 2] = [
        ("consumer", GroupProtocol::Consumer),
        ("classic", GroupProtocol::Classic),
    ];
}
