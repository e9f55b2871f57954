# The versions the reports of scripts/bench-peers and scripts/chaos-peers name. Sourced by both;
# uses $here (scripts/), $bin (the built peers) and, for the jars, $KAFKA_LIBS.

# The version of crate $2 in the committed Cargo.lock of bench-peers.d/$1.
locked_version() {
  awk -v name="$2" '$0 == "name = \"" name "\"" { getline; gsub(/version = |"/, ""); print; exit }' "$here/bench-peers.d/$1/Cargo.lock"
}

# The version in the name of the jar $1-VERSION.jar of $KAFKA_LIBS.
jar_version() {
  local jars=("$KAFKA_LIBS/$1"-*.jar) version
  version="${jars[0]##*/"$1"-}"
  echo "${version%.jar}"
}

java_version() { java -version 2>&1 | head -1 | cut -d'"' -f2; }

# The producer peers among the clients $1 (a list; a name also stands for its variants, as kacrab
# for kacrab-inflight1), each with its version: "name version, " each.
producer_peer_versions() {
  local clients=" $1 " out=""
  [[ "$clients" != *" java"* ]] || out+="Java producer (kafka-clients) $(jar_version kafka-clients) on $(java_version), "
  [[ "$clients" != *" rust-rdkafka"* ]] || out+="rust-rdkafka $(locked_version rust-rdkafka rdkafka) with its bundled librdkafka $("$bin/rust-rdkafka-perf" --version | sed 's/.*librdkafka //'), "
  [[ "$clients" != *" rdkafka"* ]] || out+="Debian's librdkafka $(pkg-config --modversion rdkafka) (rdkafka_perf), "
  [[ "$clients" != *" franz"* ]] || out+="franz-go $(sed -n 's/^require github.com\/twmb\/franz-go //p' "$here/bench-peers.d/franz/go.mod") on $(go env GOVERSION), "
  [[ "$clients" != *" krafka"* ]] || out+="krafka $(locked_version krafka krafka), "
  [[ "$clients" != *" kacrab"* ]] || out+="kacrab $(locked_version kacrab kacrab), "
  echo "$out"
}
