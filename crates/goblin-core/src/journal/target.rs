//! `--kafka`: which brokers and which topic, and the librdkafka properties the operator may
//! add. Two forms name the same thing:
//!
//! - URI: `kafka://h1:9092,h2:9092/topic?client.id=prices%20east` (topic and query
//!   percent-decoded; `&` separates properties);
//! - connection string: `bootstrap.servers=h1:9092,h2:9092;topic=topic;client.id=prices`.
//!
//! goblin-core owns the properties that decide where records go and what an acknowledgement
//! means (brokers and topic, consumer groups and offsets, partition EOF, topic auto-creation,
//! idempotence, acks, in-flight limits, ordering): setting them is refused with a message that
//! names the property, rather than silently overridden. So are properties that load code or
//! run commands, and TLS or SASL settings: this build speaks PLAINTEXT only.

/// A parsed `--kafka` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaTarget {
    /// `bootstrap.servers`: comma-separated host:port list.
    pub brokers: String,
    pub topic: String,
    /// Extra librdkafka properties, in the order given.
    pub props: Vec<(String, String)>,
}

/// Why goblin-core refuses a property: the reason it owns it.
fn owned(key: &str) -> Option<&'static str> {
    const OWNED: &[(&str, &str)] = &[
        ("bootstrap.servers", "the brokers are given once, by --kafka itself"),
        ("metadata.broker.list", "the brokers are given once, by --kafka itself"),
        ("topic", "the topic is given once, by --kafka itself"),
        ("group.id", "goblin-core uses no consumer group: the restart cursor lives in the snapshot"),
        ("group.instance.id", "goblin-core uses no consumer group"),
        ("group.protocol", "goblin-core uses no consumer group"),
        ("enable.auto.commit", "goblin-core commits no consumer offsets"),
        ("auto.commit.interval.ms", "goblin-core commits no consumer offsets"),
        ("enable.auto.offset.store", "goblin-core commits no consumer offsets"),
        ("auto.offset.reset", "goblin-core decides where replay starts"),
        ("isolation.level", "goblin-core decides which records it reads"),
        ("enable.partition.eof", "goblin-core decides how the end of the partition is detected"),
        ("allow.auto.create.topics", "goblin-core creates a missing topic itself, with the policy it needs"),
        ("auto.create.topics.enable", "goblin-core creates a missing topic itself, with the policy it needs"),
        ("enable.idempotence", "goblin-core always uses the idempotent producer"),
        ("enable.gapless.guarantee", "goblin-core sets the producer's ordering guarantees"),
        ("acks", "goblin-core always uses acks=all"),
        ("request.required.acks", "goblin-core always uses acks=all"),
        ("max.in.flight.requests.per.connection", "goblin-core keeps one request in flight per connection"),
        ("max.in.flight", "goblin-core keeps one request in flight per connection"),
        ("queuing.strategy", "goblin-core keeps records in order"),
        ("partitioner", "the journal has exactly one partition"),
        ("transactional.id", "goblin-core's records are not transactional: each is acknowledged on its own"),
        ("transaction.timeout.ms", "goblin-core's records are not transactional"),
        (
            "delivery.report.only.error",
            "goblin-core needs a delivery report for every record: acknowledgements are built from them",
        ),
        ("plugin.library.paths", "it would load code into the server"),
        ("sasl.kerberos.kinit.cmd", "it would run a command"),
        ("ssl.engine.location", "it would load code into the server"),
    ];
    if key.starts_with("test.mock.") {
        return Some("mock brokers are for librdkafka's own tests");
    }
    OWNED.iter().find(|(k, _)| *k == key).map(|(_, why)| *why).or_else(|| {
        key.starts_with("sasl.")
            .then_some("goblin-core speaks PLAINTEXT only: it is built without TLS and SASL")
    })
}

/// Decodes `%XX` escapes (and nothing else: `+` stays a plus).
fn percent_decode(s: &str, what: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(v) => out.push(v),
                None => return Err(format!("--kafka: bad percent escape in the {what} '{s}'")),
            }
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("--kafka: the {what} '{s}' does not decode to UTF-8"))
}

/// Kafka's rule for topic names: 1 to 249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
fn check_topic(t: &str) -> Result<(), String> {
    if t.is_empty() {
        return Err("--kafka: no topic given".to_string());
    }
    if t.len() > 249
        || t == "."
        || t == ".."
        || !t.bytes().all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c))
    {
        return Err(format!(
            "--kafka: '{t}' is not a valid Kafka topic name (1-249 characters of a-z, A-Z, 0-9, '.', '_', '-')"
        ));
    }
    Ok(())
}

fn add_prop(props: &mut Vec<(String, String)>, key: &str, value: &str) -> Result<(), String> {
    let key = key.trim();
    if key.is_empty() {
        return Err("--kafka: a property has no name".to_string());
    }
    if let Some(why) = owned(key) {
        return Err(format!("--kafka: property '{key}' cannot be set: {why}"));
    }
    if key == "security.protocol" && !value.trim().eq_ignore_ascii_case("plaintext") {
        return Err(format!(
            "--kafka: property '{key}' cannot be '{value}': goblin-core speaks PLAINTEXT only (it is built \
             without TLS and SASL)"
        ));
    }
    if props.iter().any(|(k, _)| k == key) {
        return Err(format!("--kafka: property '{key}' is given twice"));
    }
    props.push((key.to_string(), value.to_string()));
    Ok(())
}

impl KafkaTarget {
    /// Asks librdkafka whether it knows every added property and accepts its value (an
    /// unknown name, a codec this build leaves out, a malformed number), so that a mistake is
    /// a usage error at startup rather than a failure after the snapshot has loaded.
    /// librdkafka checks combinations (say, a timeout below another) only when a client is
    /// created, at startup.
    #[cfg(feature = "kafka")]
    pub fn check_properties(&self) -> Result<(), String> {
        let mut c = rdkafka::ClientConfig::new();
        for (k, v) in &self.props {
            c.set(k, v);
        }
        match c.create_native_config() {
            Ok(_) => Ok(()),
            Err(rdkafka::error::KafkaError::ClientConfig(_, why, key, value)) => {
                Err(format!("--kafka: property '{key}={value}': {why}"))
            }
            Err(e) => Err(format!("--kafka: {e}")),
        }
    }
}

pub fn parse(s: &str) -> Result<KafkaTarget, String> {
    let s = s.trim();
    if let Some(rest) = s.strip_prefix("kafka://") {
        let (authority, path) = rest.split_once('/').ok_or_else(|| {
            format!("--kafka: '{s}' has no topic (expected kafka://host:port[,host:port]/topic)")
        })?;
        let (path, query) = match path.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path, None),
        };
        let brokers = authority.to_string();
        if brokers.is_empty() || brokers.split(',').any(|b| b.trim().is_empty()) {
            return Err(format!("--kafka: '{s}' names no broker (expected kafka://host:port/topic)"));
        }
        let topic = percent_decode(path, "topic")?;
        check_topic(&topic)?;
        let mut props = Vec::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("--kafka: query part '{pair}' is not key=value"))?;
            add_prop(
                &mut props,
                &percent_decode(k, "property name")?,
                &percent_decode(v, "property value")?,
            )?;
        }
        return Ok(KafkaTarget { brokers, topic, props });
    }
    if s.contains("://") {
        return Err(format!("--kafka: '{s}': only the kafka:// scheme is supported"));
    }
    let (mut brokers, mut topic) = (None, None);
    let mut props = Vec::new();
    for pair in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').ok_or_else(|| format!("--kafka: '{pair}' is not key=value"))?;
        let (k, v) = (k.trim(), v.trim());
        match k {
            "bootstrap.servers" | "metadata.broker.list" if brokers.is_none() => {
                brokers = Some(v.to_string())
            }
            "topic" if topic.is_none() => topic = Some(v.to_string()),
            "bootstrap.servers" | "metadata.broker.list" | "topic" => {
                return Err(format!("--kafka: '{k}' is given twice"))
            }
            _ => add_prop(&mut props, k, v)?,
        }
    }
    let brokers = brokers.filter(|b| !b.is_empty()).ok_or_else(|| {
        "--kafka: no brokers (bootstrap.servers=host:port) in the connection string".to_string()
    })?;
    let topic = topic.ok_or_else(|| "--kafka: no topic (topic=NAME) in the connection string".to_string())?;
    check_topic(&topic)?;
    Ok(KafkaTarget { brokers, topic, props })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_form_decodes_topic_and_query() {
        let t = parse("kafka://h1:9092,h2:9092/goblin-writes?client.id=prices%20east&linger.ms=1").unwrap();
        assert_eq!(t.brokers, "h1:9092,h2:9092");
        assert_eq!(t.topic, "goblin-writes");
        assert_eq!(
            t.props,
            vec![("client.id".into(), "prices east".into()), ("linger.ms".into(), "1".into())]
        );
        assert_eq!(parse("kafka://127.0.0.1:9092/a%2Eb").unwrap().topic, "a.b");
    }

    #[test]
    fn connection_string_form() {
        let t = parse("bootstrap.servers=kafka-1:9092,kafka-2:9092;topic=goblin-writes;client.id=prices")
            .unwrap();
        assert_eq!(t.brokers, "kafka-1:9092,kafka-2:9092");
        assert_eq!(t.topic, "goblin-writes");
        assert_eq!(t.props, vec![("client.id".into(), "prices".into())]);
        // Both forms name the same target.
        let u = parse("kafka://kafka-1:9092,kafka-2:9092/goblin-writes?client.id=prices").unwrap();
        assert_eq!(t, u);
    }

    #[test]
    fn owned_and_dangerous_properties_are_refused_by_name() {
        for (value, name) in [
            ("kafka://h:1/t?acks=1", "acks"),
            ("kafka://h:1/t?enable.idempotence=false", "enable.idempotence"),
            ("kafka://h:1/t?group.id=g", "group.id"),
            ("kafka://h:1/t?auto.offset.reset=latest", "auto.offset.reset"),
            ("kafka://h:1/t?enable.partition.eof=true", "enable.partition.eof"),
            ("kafka://h:1/t?allow.auto.create.topics=true", "allow.auto.create.topics"),
            ("kafka://h:1/t?max.in.flight=5", "max.in.flight"),
            ("kafka://h:1/t?bootstrap.servers=x:1", "bootstrap.servers"),
            ("kafka://h:1/t?topic=u", "topic"),
            ("kafka://h:1/t?plugin.library.paths=/x.so", "plugin.library.paths"),
            ("kafka://h:1/t?sasl.kerberos.kinit.cmd=rm", "sasl.kerberos.kinit.cmd"),
            ("kafka://h:1/t?test.mock.num.brokers=3", "test.mock.num.brokers"),
            ("bootstrap.servers=h:1;topic=t;acks=0", "acks"),
            ("kafka://h:1/t?transactional.id=x", "transactional.id"),
            (
                "kafka://h:1/t?max.in.flight.requests.per.connection=5",
                "max.in.flight.requests.per.connection",
            ),
            ("kafka://h:1/t?request.required.acks=1", "request.required.acks"),
            ("kafka://h:1/t?isolation.level=read_uncommitted", "isolation.level"),
            ("kafka://h:1/t?enable.auto.commit=true", "enable.auto.commit"),
            ("kafka://h:1/t?enable.gapless.guarantee=false", "enable.gapless.guarantee"),
            ("kafka://h:1/t?queuing.strategy=lifo", "queuing.strategy"),
            ("kafka://h:1/t?metadata.broker.list=x:1", "metadata.broker.list"),
            ("kafka://h:1/t?partitioner=random", "partitioner"),
            ("kafka://h:1/t?delivery.report.only.error=true", "delivery.report.only.error"),
            ("kafka://h:1/t?sasl.mechanisms=PLAIN", "sasl.mechanisms"),
            ("kafka://h:1/t?security.protocol=sasl_plaintext", "security.protocol"),
            ("bootstrap.servers=h:1;topic=t;security.protocol=SSL", "security.protocol"),
        ] {
            let err = parse(value).unwrap_err();
            assert!(err.contains(&format!("'{name}'")), "{value}: {err}");
        }
        // PLAINTEXT, the one protocol this build speaks, may be named.
        let t = parse("kafka://h:1/t?security.protocol=PLAINTEXT").unwrap();
        assert_eq!(t.props, vec![("security.protocol".into(), "PLAINTEXT".into())]);
        let err = parse("bootstrap.servers=h:1;topic=t;topic=u").unwrap_err();
        assert!(err.contains("'topic' is given twice"), "{err}");
        let err = parse("bootstrap.servers=h:1;bootstrap.servers=h:2;topic=t").unwrap_err();
        assert!(err.contains("given twice"), "{err}");
        let err = parse("kafka://h:1/t?client.id=a&client.id=b").unwrap_err();
        assert!(err.contains("'client.id' is given twice"), "{err}");
    }

    #[test]
    fn malformed_values_are_refused() {
        for bad in [
            "kafka://h:1",
            "kafka:///t",
            "kafka://h:1/",
            "kafka://h:1/bad topic",
            "kafka://h:1/t?x",
            "kafka://h:1/t%zz",
            "http://h:1/t",
            "topic=t",
            "bootstrap.servers=h:1",
            "bootstrap.servers=h:1;topic=..",
            "bootstrap.servers=h:1;topic=t;novalue",
        ] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
    }
}
