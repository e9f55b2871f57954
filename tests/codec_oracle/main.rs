//! Differential tests of the codec against an independent implementation, the
//! `kafka-protocol` crate: for random values of each message and version we implement, our
//! encoding decodes to the same values with theirs, and theirs with ours.

#[macro_use]
mod harness;

mod group_messages;
mod producer_messages;
mod record_batch;
