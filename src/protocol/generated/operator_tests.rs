//! The generated requests of the admin client's operator calls (ACLs, log dirs, delegation
//! tokens, elections, reassignments, quotas, SCRAM credentials, features, DescribeCluster):
//! their flexible versions against the schemas', and golden bytes written from the schemas
//! (`CreateAclsRequest.json`, `ElectLeadersRequest.json`, `DescribeClusterRequest.json`,
//! `AlterUserScramCredentialsRequest.json`).

use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest,
    AlterUserScramCredentialsRequest, CreateAclsRequest, CreateDelegationTokenRequest,
    DeleteAclsRequest, DescribeAclsRequest, DescribeClientQuotasRequest, DescribeClusterRequest,
    DescribeDelegationTokenRequest, DescribeLogDirsRequest, DescribeUserScramCredentialsRequest,
    ElectLeadersRequest, ExpireDelegationTokenRequest, ListPartitionReassignmentsRequest,
    RenewDelegationTokenRequest, UpdateFeaturesRequest,
};

use super::tests::{assert_flexible_from, encoded};
use super::{str_bytes, topic_name};

#[test]
fn flexible_versions_match_the_schemas() {
    assert_flexible_from::<DescribeAclsRequest>();
    assert_flexible_from::<CreateAclsRequest>();
    assert_flexible_from::<DeleteAclsRequest>();
    assert_flexible_from::<DescribeLogDirsRequest>();
    assert_flexible_from::<AlterReplicaLogDirsRequest>();
    assert_flexible_from::<CreateDelegationTokenRequest>();
    assert_flexible_from::<RenewDelegationTokenRequest>();
    assert_flexible_from::<ExpireDelegationTokenRequest>();
    assert_flexible_from::<DescribeDelegationTokenRequest>();
    assert_flexible_from::<ElectLeadersRequest>();
    assert_flexible_from::<AlterPartitionReassignmentsRequest>();
    assert_flexible_from::<ListPartitionReassignmentsRequest>();
    assert_flexible_from::<DescribeClientQuotasRequest>();
    assert_flexible_from::<AlterClientQuotasRequest>();
    assert_flexible_from::<DescribeUserScramCredentialsRequest>();
    assert_flexible_from::<AlterUserScramCredentialsRequest>();
    assert_flexible_from::<UpdateFeaturesRequest>();
    assert_flexible_from::<DescribeClusterRequest>();
}

#[test]
fn create_acls_golden_bytes() {
    let request = CreateAclsRequest::default().with_creations(vec![
        AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(str_bytes("t"))
            .with_resource_pattern_type(3)
            .with_principal(str_bytes("User:b"))
            .with_host(str_bytes("*"))
            .with_operation(4)
            .with_permission_type(3),
    ]);
    // One creation (compact array, length + 1): topic "t", literal, "User:b", host "*",
    // WRITE, ALLOW, its tagged fields; the request's tagged fields.
    let mut golden = vec![2, 2, 2, b't', 3, 7];
    golden.extend_from_slice(b"User:b");
    golden.extend_from_slice(&[2, b'*', 4, 3, 0, 0]);
    assert_eq!(encoded(&request, 3), golden);
}

#[test]
fn elect_leaders_golden_bytes() {
    let request = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_topic_partitions(Some(vec![
            TopicPartitions::default()
                .with_topic(topic_name("t"))
                .with_partitions(vec![0]),
        ]))
        .with_timeout_ms(30_000);
    // Preferred; one topic "t" with partition 0 and its tagged fields; 30 s; tagged fields.
    let golden = [0, 2, 2, b't', 2, 0, 0, 0, 0, 0, 0, 0, 0x75, 0x30, 0];
    assert_eq!(encoded(&request, 2), golden);
    // Every partition: a null array.
    let all = ElectLeadersRequest::default().with_topic_partitions(None);
    assert_eq!(encoded(&all, 2)[..2], [0, 0]);
}

#[test]
fn describe_cluster_golden_bytes() {
    let request =
        DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    // Authorized operations asked; v1's endpoint type, brokers (1); tagged fields.
    assert_eq!(encoded(&request, 1), [1, 1, 0]);
    assert_eq!(encoded(&request, 0), [1, 0]);
}

#[test]
fn alter_user_scram_credentials_golden_bytes() {
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(str_bytes("u"))
            .with_mechanism(2)
            .with_iterations(4096)
            .with_salt(vec![1, 2].into())
            .with_salted_password(vec![9].into()),
    ]);
    // No deletions; one upsertion: "u", SCRAM-SHA-512, 4096 rounds, salt [1, 2], salted
    // password [9] (compact bytes), its tagged fields; the request's.
    let golden = [1, 2, 2, b'u', 2, 0, 0, 16, 0, 3, 1, 2, 2, 9, 0, 0];
    assert_eq!(encoded(&request, 0), golden);
}
