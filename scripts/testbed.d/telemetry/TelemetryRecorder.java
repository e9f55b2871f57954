// The test bed's client-telemetry receiver (KIP-714): a broker-side plugin that appends every
// PushTelemetry it is handed to a file, one JSON object per line, decoded with the OTLP reader
// Kafka itself ships (shaded into kafka-clients), so the tests check what the client sent with
// a decoder that is not ours. Compiled by scripts/testbed at `up`; set on the brokers with
// metric.reporters, and told where to write by exactly.telemetry.file.
package exactly.testbed;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.KeyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

public class TelemetryRecorder implements MetricsReporter, ClientTelemetry, ClientTelemetryReceiver {
    private String file;

    @Override
    public void configure(Map<String, ?> configs) {
        Object path = configs.get("exactly.telemetry.file");
        file = path == null ? null : path.toString();
    }

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return this;
    }

    @Override
    public synchronized void exportMetrics(AuthorizableRequestContext context, ClientTelemetryPayload payload) {
        if (file == null) return;
        StringBuilder line = new StringBuilder();
        line.append("{\"client_instance_id\":\"").append(hex(payload.clientInstanceId())).append('"');
        line.append(",\"client_id\":").append(quote(context.clientId()));
        line.append(",\"terminating\":").append(payload.isTerminating());
        line.append(",\"content_type\":").append(quote(payload.contentType()));
        line.append(",\"metrics\":[");
        try {
            MetricsData data = MetricsData.parseFrom(payload.data().duplicate());
            boolean first = true;
            for (ResourceMetrics resource : data.getResourceMetricsList()) {
                for (ScopeMetrics scope : resource.getScopeMetricsList()) {
                    for (Metric metric : scope.getMetricsList()) {
                        List<NumberDataPoint> points;
                        String kind;
                        String temporality = null;
                        if (metric.hasSum()) {
                            points = metric.getSum().getDataPointsList();
                            kind = metric.getSum().getIsMonotonic() ? "counter" : "sum";
                            temporality = metric.getSum().getAggregationTemporality().name();
                        } else if (metric.hasGauge()) {
                            points = metric.getGauge().getDataPointsList();
                            kind = "gauge";
                        } else {
                            continue;
                        }
                        for (NumberDataPoint point : points) {
                            if (!first) line.append(',');
                            first = false;
                            double value = point.getValueCase() == NumberDataPoint.ValueCase.AS_INT
                                ? point.getAsInt() : point.getAsDouble();
                            line.append("{\"name\":").append(quote(metric.getName()));
                            line.append(",\"kind\":\"").append(kind).append('"');
                            line.append(",\"temporality\":").append(quote(temporality));
                            // JSON has no NaN or infinity.
                            line.append(",\"value\":").append(Double.isFinite(value) ? Double.toString(value) : "null");
                            line.append(",\"time_unix_nano\":").append(point.getTimeUnixNano());
                            line.append(",\"attributes\":{");
                            boolean firstAttribute = true;
                            for (KeyValue attribute : point.getAttributesList()) {
                                if (!firstAttribute) line.append(',');
                                firstAttribute = false;
                                line.append(quote(attribute.getKey())).append(':')
                                    .append(quote(attribute.getValue().getStringValue()));
                            }
                            line.append("}}");
                        }
                    }
                }
            }
            line.append("]}");
        } catch (Exception e) {
            line.setLength(0);
            line.append("{\"client_instance_id\":\"").append(hex(payload.clientInstanceId()))
                .append("\",\"error\":").append(quote(e.toString())).append('}');
        }
        line.append('\n');
        try (Writer out = new OutputStreamWriter(new FileOutputStream(file, true), StandardCharsets.UTF_8)) {
            out.write(line.toString());
        } catch (IOException e) {
            throw new RuntimeException("cannot append to " + file, e);
        }
    }

    // The id as 32 hexadecimal digits (Uuid.toString is base64), as the Rust client shows it.
    private static String hex(Uuid id) {
        return String.format("%016x%016x", id.getMostSignificantBits(), id.getLeastSignificantBits());
    }

    private static String quote(String s) {
        if (s == null) return "null";
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        return out.append('"').toString();
    }
}
