// Prints the AWS_MSK_IAM payloads AWS's aws-msk-iam-auth library signs for fixed, made-up
// credentials and hosts, one JSON object a line, for tests/golden/msk_iam/payloads.jsonl.
// The signing time is the library's (now); the Rust test signs at the time each payload names.
import java.nio.charset.StandardCharsets;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentials;
import software.amazon.awssdk.auth.credentials.AwsSessionCredentials;
import software.amazon.msk.auth.iam.internals.AWS4SignedPayloadGenerator;
import software.amazon.msk.auth.iam.internals.AuthenticationRequestParams;

public class Generate {
    public static void main(String[] args) throws Exception {
        AwsCredentials basic = AwsBasicCredentials.create("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
        AwsCredentials session = AwsSessionCredentials.create("ASIAEXAMPLE", "c2VjcmV0L2tleStleGFtcGxl",
            "IQoJb3JpZ2luX2VjEXAMPLE//session+token/with=odd&characters");
        String[][] cases = {
            {"b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com", "basic"},
            {"b-2.demo.xyz789.c4.kafka.eu-west-2.amazonaws.com", "session"},
            {"boot-abc.c1.kafka-serverless.ap-southeast-2.amazonaws.com", "session"},
        };
        for (String[] c : cases) {
            AwsCredentials credentials = c[1].equals("basic") ? basic : session;
            AuthenticationRequestParams params = AuthenticationRequestParams.create(c[0], credentials, "exactly-golden/1");
            byte[] payload = new AWS4SignedPayloadGenerator().signedPayload(params);
            System.out.println(new String(payload, StandardCharsets.UTF_8));
        }
    }
}
