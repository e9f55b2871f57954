//! The generated requests of the connection, metadata and the producer's transactions against
//! the golden bytes the hand-written encoders had: the generated encoding is byte-identical at
//! every version those goldens covered.

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiVersionsRequest, EndTxnRequest,
    FindCoordinatorRequest, GroupId, InitProducerIdRequest, MetadataRequest, ProducerId,
    SaslAuthenticateRequest, SaslHandshakeRequest, TopicName, TransactionalId,
    TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::tests::{assert_flexible_from, encoded};
use crate::protocol::Encode;

fn s(value: &'static str) -> StrBytes {
    StrBytes::from_static_str(value)
}

#[test]
fn flexible_versions_match_the_schemas() {
    assert_flexible_from::<ApiVersionsRequest>();
    assert_flexible_from::<SaslHandshakeRequest>();
    assert_flexible_from::<SaslAuthenticateRequest>();
    assert_flexible_from::<MetadataRequest>();
    assert_flexible_from::<FindCoordinatorRequest>();
    assert_flexible_from::<InitProducerIdRequest>();
    assert_flexible_from::<AddPartitionsToTxnRequest>();
    assert_flexible_from::<AddOffsetsToTxnRequest>();
    assert_flexible_from::<TxnOffsetCommitRequest>();
    assert_flexible_from::<EndTxnRequest>();
}

#[test]
fn api_versions_v0_is_empty_and_v3_carries_the_software() {
    assert_eq!(encoded(&ApiVersionsRequest::default(), 0), [0u8; 0]);
    let request = ApiVersionsRequest::default()
        .with_client_software_name(s("ex"))
        .with_client_software_version(s("1.0"));
    #[rustfmt::skip]
    let v3 = [
        0x03, b'e', b'x',             // client_software_name: compact len 2+1
        0x04, b'1', b'.', b'0',       // client_software_version: compact len 3+1
        0x00,                         // tagged fields: none
    ];
    assert_eq!(encoded(&request, 3), v3);
}

#[test]
fn sasl_handshake_golden_bytes() {
    let request = SaslHandshakeRequest::default().with_mechanism(s("PLAIN"));
    // mechanism: int16 length 5, then the bytes; v0 and v1 share the layout.
    let golden = [0x00, 0x05, b'P', b'L', b'A', b'I', b'N'];
    assert_eq!(encoded(&request, 0), golden);
    assert_eq!(encoded(&request, 1), golden);
}

#[test]
fn sasl_authenticate_golden_bytes() {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from_static(b"\0u\0p"));
    // v1 classic: auth_bytes as int32 length + bytes.
    assert_eq!(encoded(&request, 1), [0, 0, 0, 4, 0, b'u', 0, b'p']);
    // v2 flexible: compact length (4 + 1), bytes, empty tagged fields.
    assert_eq!(encoded(&request, 2), [5, 0, b'u', 0, b'p', 0]);
}

#[test]
fn metadata_v1_classic_and_v12_flexible() {
    let v1_request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(TopicName(s("t")))),
    ]));
    #[rustfmt::skip]
    let v1 = [
        0x00, 0x00, 0x00, 0x01,       // topics: int32 count 1
        0x00, 0x01, b't',             //   name "t"
    ];
    assert_eq!(encoded(&v1_request, 1), v1);

    let all_topics = MetadataRequest::default().with_topics(None);
    assert_eq!(encoded(&all_topics, 1), [0xff, 0xff, 0xff, 0xff]); // null: all topics
    // v0 has no null array: there an empty list means all topics, which is how
    // `net::metadata::metadata_request` asks for them at v0.
    let empty = MetadataRequest::default().with_topics(Some(Vec::new()));
    assert_eq!(encoded(&empty, 0), [0x00, 0x00, 0x00, 0x00]);

    let v12_request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default()
                .with_topic_id("ab".repeat(16).parse().expect("a UUID"))
                .with_name(None),
        ]))
        .with_allow_auto_topic_creation(false)
        .with_include_topic_authorized_operations(true);
    #[rustfmt::skip]
    let v12 = [
        0x02,                         // topics: compact count 1+1
        0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab,
        0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, 0xab, // topic_id
        0x00,                         //   name: compact null
        0x00,                         //   topic tagged fields: none
        0x00,                         // allow_auto_topic_creation false
        0x01,                         // include_topic_authorized_operations true
        0x00,                         // tagged fields: none
    ];
    assert_eq!(encoded(&v12_request, 12), v12);
}

#[test]
fn metadata_refusing_auto_creation_needs_v4() {
    let request = MetadataRequest::default().with_allow_auto_topic_creation(false);
    let mut out = bytes::BytesMut::new();
    let error = request.write_body(3, &mut out).unwrap_err();
    assert_eq!((error.api_key, error.version), (3, 3));
    assert!(request.write_body(4, &mut out).is_ok());
}

#[test]
fn find_coordinator_v1_classic_v3_flexible_and_v4_batched() {
    let request = FindCoordinatorRequest::default()
        .with_key(s("tx"))
        .with_key_type(1);
    #[rustfmt::skip]
    let v1 = [
        0x00, 0x02, b't', b'x',       // key "tx"
        0x01,                         // key_type 1 (transaction)
    ];
    assert_eq!(encoded(&request, 1), v1);
    #[rustfmt::skip]
    let v3 = [
        0x03, b't', b'x',             // key "tx" (compact)
        0x01,                         // key_type 1
        0x00,                         // tagged fields
    ];
    assert_eq!(encoded(&request, 3), v3);

    let batched = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s("a"), s("b")]);
    #[rustfmt::skip]
    let v4 = [
        0x00,                         // key_type 0 (group)
        0x03,                         // coordinator_keys: compact 2+1
        0x02, b'a',                   //   "a"
        0x02, b'b',                   //   "b"
        0x00,                         // tagged fields
    ];
    assert_eq!(encoded(&batched, 4), v4);
}

#[test]
fn init_producer_id_v1_classic_and_v3_flexible() {
    let v1_request = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(s("t"))))
        .with_transaction_timeout_ms(60_000);
    #[rustfmt::skip]
    let v1 = [
        0x00, 0x01, b't',             // transactional_id "t"
        0x00, 0x00, 0xea, 0x60,       // transaction_timeout_ms 60000
    ];
    assert_eq!(encoded(&v1_request, 1), v1);

    let v3_request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(1)
        .with_producer_id(ProducerId(1000))
        .with_producer_epoch(3);
    #[rustfmt::skip]
    let v3 = [
        0x00,                         // transactional_id: compact null
        0x00, 0x00, 0x00, 0x01,       // transaction_timeout_ms 1
        0, 0, 0, 0, 0, 0, 0x03, 0xe8, // producer_id 1000
        0x00, 0x03,                   // producer_epoch 3
        0x00,                         // tagged fields
    ];
    assert_eq!(encoded(&v3_request, 3), v3);
}

/// Transaction "t" of producer 5 (epoch 0) adding partition 1 of topic "x".
fn topic_x() -> Vec<AddPartitionsToTxnTopic> {
    vec![
        AddPartitionsToTxnTopic::default()
            .with_name(TopicName(s("x")))
            .with_partitions(vec![1]),
    ]
}

#[test]
fn add_partitions_to_txn_v2_classic_and_v3_flexible() {
    // v0–3 carry one transaction's fields at the top level (`v3_and_below_*`).
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(TransactionalId(s("t")))
        .with_v3_and_below_producer_id(ProducerId(5))
        .with_v3_and_below_producer_epoch(0)
        .with_v3_and_below_topics(topic_x());
    #[rustfmt::skip]
    let v2 = [
        0x00, 0x01, b't',             // v3_and_below_transactional_id "t"
        0, 0, 0, 0, 0, 0, 0, 0x05,    // v3_and_below_producer_id 5
        0x00, 0x00,                   // v3_and_below_producer_epoch 0
        0x00, 0x00, 0x00, 0x01,       // v3_and_below_topics: 1
        0x00, 0x01, b'x',             //   name "x"
        0x00, 0x00, 0x00, 0x01,       //   partitions: 1
        0x00, 0x00, 0x00, 0x01,       //     1
    ];
    assert_eq!(encoded(&request, 2), v2);
    #[rustfmt::skip]
    let v3 = [
        0x02, b't',                   // v3_and_below_transactional_id "t"
        0, 0, 0, 0, 0, 0, 0, 0x05,    // v3_and_below_producer_id 5
        0x00, 0x00,                   // v3_and_below_producer_epoch 0
        0x02,                         // v3_and_below_topics: compact 1+1
        0x02, b'x',                   //   name "x"
        0x02, 0x00, 0x00, 0x00, 0x01, //   partitions: compact 1+1, [1]
        0x00,                         //   topic tagged fields
        0x00,                         // tagged fields
    ];
    assert_eq!(encoded(&request, 3), v3);
    // The single-transaction fields do not exist from v4 (the brokers' batched form).
    let mut out = bytes::BytesMut::new();
    assert!(request.write_body(4, &mut out).is_err());
}

#[test]
fn add_partitions_to_txn_v4_batched() {
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(s("t")))
            .with_producer_id(ProducerId(5))
            .with_producer_epoch(0)
            .with_verify_only(true)
            .with_topics(topic_x()),
    ]);
    #[rustfmt::skip]
    let v4 = [
        0x02,                         // transactions: compact 1+1
        0x02, b't',                   //   transactional_id "t"
        0, 0, 0, 0, 0, 0, 0, 0x05,    //   producer_id 5
        0x00, 0x00,                   //   producer_epoch 0
        0x01,                         //   verify_only true
        0x02,                         //   topics: compact 1+1
        0x02, b'x',                   //     name "x"
        0x02, 0x00, 0x00, 0x00, 0x01, //     partitions: [1]
        0x00,                         //     topic tagged fields
        0x00,                         //   transaction tagged fields
        0x00,                         // tagged fields
    ];
    assert_eq!(encoded(&request, 4), v4);
}

#[test]
fn add_offsets_to_txn_v2_classic_and_v4_flexible() {
    let request = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s("t")))
        .with_producer_id(ProducerId(1))
        .with_producer_epoch(0)
        .with_group_id(GroupId(s("g")));
    #[rustfmt::skip]
    let v2 = [
        0x00, 0x01, b't',             // transactional_id "t"
        0, 0, 0, 0, 0, 0, 0, 0x01,    // producer_id 1
        0x00, 0x00,                   // producer_epoch 0
        0x00, 0x01, b'g',             // group_id "g"
    ];
    assert_eq!(encoded(&request, 2), v2);
    #[rustfmt::skip]
    let v4 = [
        0x02, b't',                   // transactional_id "t" (compact)
        0, 0, 0, 0, 0, 0, 0, 0x01,    // producer_id 1
        0x00, 0x00,                   // producer_epoch 0
        0x02, b'g',                   // group_id "g" (compact)
        0x00,                         // tagged fields
    ];
    assert_eq!(encoded(&request, 4), v4);
}

#[test]
fn end_txn_v0_classic_and_v3_flexible() {
    let request = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(s("t")))
        .with_producer_id(ProducerId(9))
        .with_producer_epoch(2)
        .with_committed(true);
    #[rustfmt::skip]
    let v0 = [
        0x00, 0x01, b't',             // transactional_id "t"
        0, 0, 0, 0, 0, 0, 0, 0x09,    // producer_id 9
        0x00, 0x02,                   // producer_epoch 2
        0x01,                         // committed true
    ];
    assert_eq!(encoded(&request, 0), v0);
    #[rustfmt::skip]
    let v3 = [
        0x02, b't',                   // transactional_id "t" (compact)
        0, 0, 0, 0, 0, 0, 0, 0x09,    // producer_id 9
        0x00, 0x02,                   // producer_epoch 2
        0x01,                         // committed true
        0x00,                         // tagged fields
    ];
    assert_eq!(encoded(&request, 3), v3);
}

/// Offset 100 (leader epoch 6) of partition 2 of topic "in", with `metadata`.
fn txn_offset_commit(metadata: Option<StrBytes>) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s("txn")))
        .with_group_id(GroupId(s("group")))
        .with_producer_id(ProducerId(3))
        .with_producer_epoch(1)
        .with_topics(vec![
            TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(s("in")))
                .with_partitions(vec![
                    TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(2)
                        .with_committed_offset(100)
                        .with_committed_leader_epoch(6)
                        .with_committed_metadata(metadata),
                ]),
        ])
}

#[test]
fn txn_offset_commit_v2_classic() {
    #[rustfmt::skip]
    let v2 = [
        0x00, 0x03, b't', b'x', b'n', // transactional_id "txn"
        0x00, 0x05, b'g', b'r', b'o', b'u', b'p', // group_id "group"
        0, 0, 0, 0, 0, 0, 0, 0x03,    // producer_id 3
        0x00, 0x01,                   // producer_epoch 1
        0x00, 0x00, 0x00, 0x01,       // topics: 1
        0x00, 0x02, b'i', b'n',       //   name "in"
        0x00, 0x00, 0x00, 0x01,       //   partitions: 1
        0x00, 0x00, 0x00, 0x02,       //     partition_index 2
        0, 0, 0, 0, 0, 0, 0, 0x64,    //     committed_offset 100
        0x00, 0x00, 0x00, 0x06,       //     committed_leader_epoch 6
        0xff, 0xff,                   //     committed_metadata null
    ];
    assert_eq!(encoded(&txn_offset_commit(None), 2), v2);
}

#[test]
fn txn_offset_commit_v3_flexible_with_group_metadata() {
    let request = txn_offset_commit(Some(s("m")))
        .with_generation_id(4)
        .with_member_id(s("member-1"))
        .with_group_instance_id(Some(s("instance")));
    #[rustfmt::skip]
    let v3 = [
        0x04, b't', b'x', b'n',       // transactional_id "txn"
        0x06, b'g', b'r', b'o', b'u', b'p', // group_id "group"
        0, 0, 0, 0, 0, 0, 0, 0x03,    // producer_id 3
        0x00, 0x01,                   // producer_epoch 1
        0x00, 0x00, 0x00, 0x04,       // generation_id 4 (KIP-447)
        0x09, b'm', b'e', b'm', b'b', b'e', b'r', b'-', b'1', // member_id "member-1"
        0x09, b'i', b'n', b's', b't', b'a', b'n', b'c', b'e', // group_instance_id "instance"
        0x02,                         // topics: compact 1+1
        0x03, b'i', b'n',             //   name "in"
        0x02,                         //   partitions: compact 1+1
        0x00, 0x00, 0x00, 0x02,       //     partition_index 2
        0, 0, 0, 0, 0, 0, 0, 0x64,    //     committed_offset 100
        0x00, 0x00, 0x00, 0x06,       //     committed_leader_epoch 6
        0x02, b'm',                   //     committed_metadata "m"
        0x00,                         //     partition tagged fields
        0x00,                         //   topic tagged fields
        0x00,                         // tagged fields
    ];
    assert_eq!(encoded(&request, 3), v3);
    // Below v3 the group metadata has no field: an error, not a commit the coordinator
    // cannot fence (KIP-447).
    let mut out = bytes::BytesMut::new();
    let error = request.write_body(2, &mut out).unwrap_err();
    assert_eq!((error.api_key, error.version), (28, 2));
}
