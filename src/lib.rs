//! `exactly`: a Kafka producer that speaks the Kafka wire protocol itself and delivers records
//! idempotently and transactionally, holding its guarantees when brokers die, acknowledgements
//! get lost and connections reset.
//!
//! The crate is layered (see the project's DESIGN.md):
//! - [`protocol`]: a pure codec for the Kafka wire protocol and RecordBatch v2.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod protocol;
