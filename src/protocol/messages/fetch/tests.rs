//! The Fetch codec against golden bytes, and its decoder against truncated and hostile input.

use super::*;
use crate::protocol::messages::test_support::{assert_golden, assert_robust, decode};

const TOPIC_ID: [u8; 16] = [
    0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
];

/// A consumer's fetch of one partition, by name (≤ v12) or by id (v13+).
fn consumer_request(by_id: bool) -> FetchRequest {
    FetchRequest {
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 1 << 20,
        isolation_level: 1,
        topics: vec![FetchTopic {
            topic: if by_id { String::new() } else { "t".into() },
            topic_id: if by_id { TOPIC_ID } else { [0; 16] },
            partitions: vec![FetchPartition {
                partition: 0,
                current_leader_epoch: 3,
                fetch_offset: 7,
                partition_max_bytes: 1 << 16,
                ..FetchPartition::default()
            }],
        }],
        ..FetchRequest::default()
    }
}

#[test]
fn request_v11_classic_golden() {
    let mut value = consumer_request(false);
    value.rack_id = "r".into();
    #[rustfmt::skip]
    let golden = [
        0xff, 0xff, 0xff, 0xff,                 // replica_id -1 (v0–14)
        0x00, 0x00, 0x01, 0xf4,                 // max_wait_ms 500
        0x00, 0x00, 0x00, 0x01,                 // min_bytes 1
        0x00, 0x10, 0x00, 0x00,                 // max_bytes 1 MiB (v3+)
        0x01,                                   // isolation_level (v4+)
        0x00, 0x00, 0x00, 0x00,                 // session_id (v7+)
        0xff, 0xff, 0xff, 0xff,                 // session_epoch -1 (v7+)
        0x00, 0x00, 0x00, 0x01,                 // topics: count 1
        0x00, 0x01, b't',                       //   topic
        0x00, 0x00, 0x00, 0x01,                 //   partitions: count 1
        0x00, 0x00, 0x00, 0x00,                 //     partition
        0x00, 0x00, 0x00, 0x03,                 //     current_leader_epoch (v9+)
        0, 0, 0, 0, 0, 0, 0, 7,                 //     fetch_offset
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // log_start_offset -1 (v5+)
        0x00, 0x01, 0x00, 0x00,                 //     partition_max_bytes 64 KiB
        0x00, 0x00, 0x00, 0x00,                 // forgotten_topics_data: count 0 (v7+)
        0x00, 0x01, b'r',                       // rack_id (v11+)
    ];
    assert_golden(&value, 11, &golden);
}

#[test]
fn request_v0_classic_golden() {
    let mut value = consumer_request(false);
    value.max_bytes = i32::MAX;
    value.isolation_level = 0;
    value.topics[0].partitions[0].current_leader_epoch = -1;
    #[rustfmt::skip]
    let golden = [
        0xff, 0xff, 0xff, 0xff,                 // replica_id
        0x00, 0x00, 0x01, 0xf4,                 // max_wait_ms
        0x00, 0x00, 0x00, 0x01,                 // min_bytes
        0x00, 0x00, 0x00, 0x01,                 // topics: count 1
        0x00, 0x01, b't',                       //   topic
        0x00, 0x00, 0x00, 0x01,                 //   partitions: count 1
        0x00, 0x00, 0x00, 0x00,                 //     partition
        0, 0, 0, 0, 0, 0, 0, 7,                 //     fetch_offset
        0x00, 0x01, 0x00, 0x00,                 //     partition_max_bytes
    ];
    assert_golden(&value, 0, &golden);
}

#[test]
fn request_v12_flexible_golden_with_cluster_id() {
    let mut value = consumer_request(false);
    value.cluster_id = Some("c".into());
    value.topics[0].partitions[0].last_fetched_epoch = 2;
    #[rustfmt::skip]
    let golden = [
        0xff, 0xff, 0xff, 0xff,                 // replica_id -1
        0x00, 0x00, 0x01, 0xf4,                 // max_wait_ms
        0x00, 0x00, 0x00, 0x01,                 // min_bytes
        0x00, 0x10, 0x00, 0x00,                 // max_bytes
        0x01,                                   // isolation_level
        0x00, 0x00, 0x00, 0x00,                 // session_id
        0xff, 0xff, 0xff, 0xff,                 // session_epoch
        0x02,                                   // topics: compact count 1 + 1
        0x02, b't',                             //   topic: compact string (v12 is by name)
        0x02,                                   //   partitions: compact count 1 + 1
        0x00, 0x00, 0x00, 0x00,                 //     partition
        0x00, 0x00, 0x00, 0x03,                 //     current_leader_epoch
        0, 0, 0, 0, 0, 0, 0, 7,                 //     fetch_offset
        0x00, 0x00, 0x00, 0x02,                 //     last_fetched_epoch (v12+)
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // log_start_offset -1
        0x00, 0x01, 0x00, 0x00,                 //     partition_max_bytes
        0x00,                                   //     partition tagged fields: none
        0x00,                                   //   topic tagged fields
        0x01,                                   // forgotten_topics_data: compact count 0 + 1
        0x01,                                   // rack_id: empty compact string
        0x01,                                   // tagged fields: 1
        0x00, 0x02, 0x02, b'c',                 //   tag 0 ClusterId, size 2, compact "c"
    ];
    assert_golden(&value, 12, &golden);
}

#[test]
fn request_v18_flexible_golden_by_topic_id_with_tagged_fields() {
    let mut value = consumer_request(true);
    value.replica_state = ReplicaState {
        replica_id: 1,
        replica_epoch: 9,
    };
    value.forgotten_topics_data = vec![ForgottenTopic {
        topic: String::new(),
        topic_id: TOPIC_ID,
        partitions: vec![4],
    }];
    let partition = &mut value.topics[0].partitions[0];
    partition.replica_directory_id = [0x11; 16];
    partition.high_watermark = 6;
    #[rustfmt::skip]
    let golden = [
        // no replica_id from v15 (it moved into the tagged ReplicaState)
        0x00, 0x00, 0x01, 0xf4,                 // max_wait_ms
        0x00, 0x00, 0x00, 0x01,                 // min_bytes
        0x00, 0x10, 0x00, 0x00,                 // max_bytes
        0x01,                                   // isolation_level
        0x00, 0x00, 0x00, 0x00,                 // session_id
        0xff, 0xff, 0xff, 0xff,                 // session_epoch
        0x02,                                   // topics: compact count 1 + 1
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
        0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf, // topic_id (v13+)
        0x02,                                   //   partitions
        0x00, 0x00, 0x00, 0x00,                 //     partition
        0x00, 0x00, 0x00, 0x03,                 //     current_leader_epoch
        0, 0, 0, 0, 0, 0, 0, 7,                 //     fetch_offset
        0xff, 0xff, 0xff, 0xff,                 //     last_fetched_epoch -1
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // log_start_offset -1
        0x00, 0x01, 0x00, 0x00,                 //     partition_max_bytes
        0x02,                                   //     partition tagged fields: 2
        0x00, 0x10,                             //       tag 0 ReplicaDirectoryId, size 16
        0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
        0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
        0x01, 0x08,                             //       tag 1 HighWatermark (v18), size 8
        0, 0, 0, 0, 0, 0, 0, 6,
        0x00,                                   //   topic tagged fields
        0x02,                                   // forgotten_topics_data: compact count 1 + 1
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
        0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf, // topic_id
        0x02, 0x00, 0x00, 0x00, 0x04,           //   partitions [4]
        0x00,                                   //   forgotten topic tagged fields
        0x01,                                   // rack_id: empty
        0x01,                                   // tagged fields: 1 (no ClusterId)
        0x01, 0x0d,                             //   tag 1 ReplicaState, size 13
        0x00, 0x00, 0x00, 0x01,                 //     replica_id
        0, 0, 0, 0, 0, 0, 0, 9,                 //     replica_epoch
        0x00,                                   //     ReplicaState tagged fields
    ];
    assert_golden(&value, 18, &golden);
}

fn partition_response() -> FetchPartitionResponse {
    FetchPartitionResponse {
        partition_index: 0,
        error_code: 0,
        high_watermark: 10,
        last_stable_offset: 8,
        log_start_offset: 0,
        aborted_transactions: Some(vec![AbortedTransaction {
            producer_id: 5,
            first_offset: 6,
        }]),
        records: Some(Bytes::from_static(&[0xde, 0xad])),
        ..FetchPartitionResponse::default()
    }
}

#[test]
fn response_v4_classic_golden() {
    let mut partition = partition_response();
    partition.log_start_offset = -1; // v5+
    let value = FetchResponse {
        throttle_time_ms: 0,
        responses: vec![FetchTopicResponse {
            topic: "t".into(),
            topic_id: [0; 16],
            partitions: vec![partition],
        }],
        ..FetchResponse::default()
    };
    #[rustfmt::skip]
    let golden = [
        0x00, 0x00, 0x00, 0x00,                 // throttle_time_ms (v1+)
        0x00, 0x00, 0x00, 0x01,                 // responses: count 1
        0x00, 0x01, b't',                       //   topic
        0x00, 0x00, 0x00, 0x01,                 //   partitions: count 1
        0x00, 0x00, 0x00, 0x00,                 //     partition_index
        0x00, 0x00,                             //     error_code
        0, 0, 0, 0, 0, 0, 0, 10,                //     high_watermark
        0, 0, 0, 0, 0, 0, 0, 8,                 //     last_stable_offset (v4+)
        0x00, 0x00, 0x00, 0x01,                 //     aborted_transactions: count 1 (v4+)
        0, 0, 0, 0, 0, 0, 0, 5,                 //       producer_id
        0, 0, 0, 0, 0, 0, 0, 6,                 //       first_offset
        0x00, 0x00, 0x00, 0x02, 0xde, 0xad,     //     records: int32 length 2
    ];
    assert_golden(&value, 4, &golden);
}

#[test]
fn response_v0_classic_golden() {
    let value = FetchResponse {
        responses: vec![FetchTopicResponse {
            topic: "t".into(),
            topic_id: [0; 16],
            partitions: vec![FetchPartitionResponse {
                partition_index: 0,
                error_code: 0,
                high_watermark: 10,
                records: Some(Bytes::from_static(&[0xde, 0xad])),
                ..FetchPartitionResponse::default()
            }],
        }],
        ..FetchResponse::default()
    };
    #[rustfmt::skip]
    let golden = [
        // no throttle_time_ms before v1
        0x00, 0x00, 0x00, 0x01,                 // responses: count 1
        0x00, 0x01, b't',                       //   topic
        0x00, 0x00, 0x00, 0x01,                 //   partitions: count 1
        0x00, 0x00, 0x00, 0x00,                 //     partition_index
        0x00, 0x00,                             //     error_code
        0, 0, 0, 0, 0, 0, 0, 10,                //     high_watermark
        0x00, 0x00, 0x00, 0x02, 0xde, 0xad,     //     records (a v0/v1 message set)
    ];
    assert_golden(&value, 0, &golden);
}

#[test]
fn response_v11_classic_golden_with_null_aborted_and_records() {
    let value = FetchResponse {
        throttle_time_ms: 1,
        error_code: 0,
        session_id: 3,
        responses: vec![FetchTopicResponse {
            topic: "t".into(),
            topic_id: [0; 16],
            partitions: vec![FetchPartitionResponse {
                partition_index: 1,
                error_code: 1, // OFFSET_OUT_OF_RANGE
                high_watermark: -1,
                aborted_transactions: None,
                preferred_read_replica: 2,
                records: None,
                ..FetchPartitionResponse::default()
            }],
        }],
        node_endpoints: Vec::new(),
    };
    #[rustfmt::skip]
    let golden = [
        0x00, 0x00, 0x00, 0x01,                 // throttle_time_ms
        0x00, 0x00,                             // error_code (v7+)
        0x00, 0x00, 0x00, 0x03,                 // session_id (v7+)
        0x00, 0x00, 0x00, 0x01,                 // responses: count 1
        0x00, 0x01, b't',                       //   topic
        0x00, 0x00, 0x00, 0x01,                 //   partitions: count 1
        0x00, 0x00, 0x00, 0x01,                 //     partition_index
        0x00, 0x01,                             //     error_code
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // high_watermark -1
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // last_stable_offset -1
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // log_start_offset -1
        0xff, 0xff, 0xff, 0xff,                 //     aborted_transactions: null
        0x00, 0x00, 0x00, 0x02,                 //     preferred_read_replica (v11+)
        0xff, 0xff, 0xff, 0xff,                 //     records: null
    ];
    assert_golden(&value, 11, &golden);
}

#[test]
fn response_v16_flexible_golden_with_tagged_fields() {
    let mut partition = partition_response();
    partition.error_code = 6; // NOT_LEADER_OR_FOLLOWER
    partition.current_leader = LeaderIdAndEpoch {
        leader_id: 2,
        leader_epoch: 4,
    };
    partition.diverging_epoch = EpochEndOffset {
        epoch: 1,
        end_offset: 3,
    };
    let value = FetchResponse {
        throttle_time_ms: 0,
        error_code: 0,
        session_id: 0,
        responses: vec![FetchTopicResponse {
            topic: String::new(),
            topic_id: TOPIC_ID,
            partitions: vec![partition],
        }],
        node_endpoints: vec![BrokerEndpoint {
            node_id: 2,
            host: "h".into(),
            port: 9092,
            rack: None,
        }],
    };
    #[rustfmt::skip]
    let golden = [
        0x00, 0x00, 0x00, 0x00,                 // throttle_time_ms
        0x00, 0x00,                             // error_code
        0x00, 0x00, 0x00, 0x00,                 // session_id
        0x02,                                   // responses: compact count 1 + 1
        0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
        0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf, // topic_id (v13+)
        0x02,                                   //   partitions
        0x00, 0x00, 0x00, 0x00,                 //     partition_index
        0x00, 0x06,                             //     error_code
        0, 0, 0, 0, 0, 0, 0, 10,                //     high_watermark
        0, 0, 0, 0, 0, 0, 0, 8,                 //     last_stable_offset
        0, 0, 0, 0, 0, 0, 0, 0,                 //     log_start_offset
        0x02,                                   //     aborted_transactions: compact 1 + 1
        0, 0, 0, 0, 0, 0, 0, 5,                 //       producer_id
        0, 0, 0, 0, 0, 0, 0, 6,                 //       first_offset
        0x00,                                   //       tagged fields
        0xff, 0xff, 0xff, 0xff,                 //     preferred_read_replica -1
        0x03, 0xde, 0xad,                       //     records: compact length 2 + 1
        0x02,                                   //     tagged fields: 2 (no SnapshotId)
        0x00, 0x0d,                             //       tag 0 DivergingEpoch, size 13
        0x00, 0x00, 0x00, 0x01,                 //         epoch
        0, 0, 0, 0, 0, 0, 0, 3,                 //         end_offset
        0x00,                                   //         tagged fields
        0x01, 0x09,                             //       tag 1 CurrentLeader, size 9
        0x00, 0x00, 0x00, 0x02,                 //         leader_id
        0x00, 0x00, 0x00, 0x04,                 //         leader_epoch
        0x00,                                   //         tagged fields
        0x00,                                   //   topic tagged fields
        0x01,                                   // tagged fields: 1
        0x00, 0x0d,                             //   tag 0 NodeEndpoints (v16+), size 13
        0x02,                                   //     compact count 1 + 1
        0x00, 0x00, 0x00, 0x02,                 //       node_id
        0x02, b'h',                             //       host
        0x00, 0x00, 0x23, 0x84,                 //       port 9092
        0x00,                                   //       rack: null
        0x00,                                   //       tagged fields
    ];
    assert_golden(&value, 16, &golden);
}

#[test]
fn unknown_tagged_fields_are_skipped() {
    // A v12 response whose partition carries SnapshotId (tag 2) and an unknown tag 9,
    // and whose top level carries an unknown tag 5.
    #[rustfmt::skip]
    let bytes = [
        0x00, 0x00, 0x00, 0x00,                 // throttle_time_ms
        0x00, 0x00,                             // error_code
        0x00, 0x00, 0x00, 0x00,                 // session_id
        0x02,                                   // responses
        0x02, b't',                             //   topic
        0x02,                                   //   partitions
        0x00, 0x00, 0x00, 0x00,                 //     partition_index
        0x00, 0x00,                             //     error_code
        0, 0, 0, 0, 0, 0, 0, 0,                 //     high_watermark
        0, 0, 0, 0, 0, 0, 0, 0,                 //     last_stable_offset
        0, 0, 0, 0, 0, 0, 0, 0,                 //     log_start_offset
        0x00,                                   //     aborted_transactions: null
        0xff, 0xff, 0xff, 0xff,                 //     preferred_read_replica
        0x00,                                   //     records: null
        0x02,                                   //     tagged fields: 2
        0x02, 0x0d,                             //       tag 2 SnapshotId, size 13
        0, 0, 0, 0, 0, 0, 0, 5,                 //         end_offset
        0x00, 0x00, 0x00, 0x01,                 //         epoch
        0x00,                                   //         tagged fields
        0x09, 0x01, 0xaa,                       //       tag 9 (unknown), size 1
        0x00,                                   //   topic tagged fields
        0x01, 0x05, 0x02, 0xbb, 0xcc,           // tagged fields: tag 5 (unknown), size 2
    ];
    let response: FetchResponse = decode(&bytes, 12).unwrap();
    let partition = &response.responses[0].partitions[0];
    assert_eq!(
        partition.snapshot_id,
        SnapshotId {
            end_offset: 5,
            epoch: 1
        }
    );
    assert_eq!(partition.aborted_transactions, None);
    assert_eq!(partition.records, None);
    assert!(response.node_endpoints.is_empty());
}

#[test]
fn decoding_is_robust() {
    let mut request = consumer_request(false);
    request.topics[0].topic_id = TOPIC_ID;
    request.cluster_id = Some("c".into());
    request.replica_state = ReplicaState {
        replica_id: 1,
        replica_epoch: 2,
    };
    request.forgotten_topics_data = vec![ForgottenTopic {
        topic: "f".into(),
        topic_id: TOPIC_ID,
        partitions: vec![1],
    }];
    request.rack_id = "r".into();
    let partition = &mut request.topics[0].partitions[0];
    partition.replica_directory_id = [1; 16];
    partition.high_watermark = 3;
    assert_robust(&request);

    let mut partition = partition_response();
    partition.diverging_epoch = EpochEndOffset {
        epoch: 1,
        end_offset: 2,
    };
    partition.current_leader = LeaderIdAndEpoch {
        leader_id: 1,
        leader_epoch: 2,
    };
    partition.snapshot_id = SnapshotId {
        end_offset: 1,
        epoch: 2,
    };
    assert_robust(&FetchResponse {
        throttle_time_ms: 1,
        error_code: 0,
        session_id: 2,
        responses: vec![FetchTopicResponse {
            topic: "t".into(),
            topic_id: TOPIC_ID,
            partitions: vec![partition],
        }],
        node_endpoints: vec![BrokerEndpoint {
            node_id: 1,
            host: "h".into(),
            port: 1,
            rack: Some("r".into()),
        }],
    });
}
