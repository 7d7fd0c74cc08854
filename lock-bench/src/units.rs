//! Parsing of the command line's durations and latency models.

use std::time::Duration;

use lock_storage_memory::Latency;

/// Parses a duration such as `0`, `250us`, `1.5ms`, `2s`: a non-negative decimal number and
/// a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`); a bare `0` needs no unit.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{text:?} has no unit: write e.g. 500us, 1.5ms or 2s"))?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number"))?;
    let seconds_per_unit = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        _ => {
            return Err(format!(
                "{text:?} has unknown unit {unit:?}: use ns, us, ms, s or m"
            ));
        }
    };
    let seconds = value * seconds_per_unit;
    if !seconds.is_finite() || seconds > 86_400.0 * 365.0 {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// The default latency model: every one-way message log-normal with median 250 µs and 99th
/// percentile 1 ms, so that a QUORUM round trip (the second fastest of three request + reply
/// pairs) takes about 0.6 ms of simulated time with a tail to 2 ms, as on a LAN. The
/// lock sees it rounded up to Tokio's 1 ms timer tick (see the crate docs).
pub const LAN: Latency = Latency::LogNormal {
    median: Duration::from_micros(250),
    p99: Duration::from_millis(1),
};

/// A model at the scale of the thesis's 2014 cluster (about 5 ms per quorum request), where
/// the 1 ms timer tick matters less.
pub const THESIS: Latency = Latency::LogNormal {
    median: Duration::from_micros(2_000),
    p99: Duration::from_millis(6),
};

/// Parses a latency model of one simulated message (one way: a quorum round trip is a
/// request and a reply):
///
/// * `lan` (the default, [`LAN`]), `thesis` ([`THESIS`]), `zero`;
/// * `fixed:DUR`;
/// * `uniform:MIN,MAX`;
/// * `exp:MIN,MEAN_EXTRA` (a floor plus an exponential tail);
/// * `lognormal:MEDIAN,P99`.
pub fn parse_latency(text: &str) -> Result<Latency, String> {
    let text = text.trim();
    let (kind, arguments) = text.split_once(':').unwrap_or((text, ""));
    let durations = |count: usize| -> Result<Vec<Duration>, String> {
        let parts: Vec<&str> = arguments
            .split(',')
            .filter(|part| !part.is_empty())
            .collect();
        if parts.len() != count {
            return Err(format!(
                "latency {text:?}: {kind} takes {count} duration(s) after the colon, got {}",
                parts.len()
            ));
        }
        parts.into_iter().map(parse_duration).collect()
    };
    let latency = match kind {
        "lan" if arguments.is_empty() => LAN,
        "thesis" if arguments.is_empty() => THESIS,
        "zero" if arguments.is_empty() => Latency::Zero,
        "fixed" => Latency::Fixed(durations(1)?[0]),
        "uniform" => {
            let values = durations(2)?;
            Latency::Uniform {
                min: values[0],
                max: values[1],
            }
        }
        "exp" => {
            let values = durations(2)?;
            Latency::Exponential {
                min: values[0],
                mean_extra: values[1],
            }
        }
        "lognormal" => {
            let values = durations(2)?;
            Latency::LogNormal {
                median: values[0],
                p99: values[1],
            }
        }
        _ => {
            return Err(format!(
                "unknown latency model {text:?}: use lan, thesis, zero, fixed:DUR, \
                 uniform:MIN,MAX, exp:MIN,MEAN_EXTRA or lognormal:MEDIAN,P99"
            ));
        }
    };
    latency
        .validate()
        .map_err(|error| format!("latency {text:?}: {error}"))?;
    Ok(latency)
}

/// Describes a latency model in the syntax [`parse_latency`] reads.
pub fn describe_latency(latency: &Latency) -> String {
    let us = |duration: &Duration| format!("{}us", duration.as_micros());
    match latency {
        Latency::Zero => "zero".into(),
        Latency::Fixed(value) => format!("fixed:{}", us(value)),
        Latency::Uniform { min, max } => format!("uniform:{},{}", us(min), us(max)),
        Latency::Exponential { min, mean_extra } => format!("exp:{},{}", us(min), us(mean_extra)),
        Latency::LogNormal { median, p99 } => format!("lognormal:{},{}", us(median), us(p99)),
    }
}

/// Parses one process count, 1 to 64.
pub fn parse_process_count(text: &str) -> Result<usize, String> {
    let count: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a process count"))?;
    if !(1..=64).contains(&count) {
        return Err(format!("process counts must be 1 to 64, got {count}"));
    }
    Ok(count)
}

/// Milliseconds as a float, for reports.
pub fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1.5ms"), Ok(Duration::from_micros(1500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert!(parse_duration("5").unwrap_err().contains("no unit"));
        assert!(parse_duration("5h").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("-5ms").is_err());
    }

    #[test]
    fn latency_models_round_trip() {
        for text in [
            "zero",
            "fixed:500us",
            "uniform:100us,900us",
            "exp:200us,300us",
            "lognormal:250us,1000us",
        ] {
            let latency = parse_latency(text).unwrap();
            assert_eq!(parse_latency(&describe_latency(&latency)).unwrap(), latency);
        }
        assert_eq!(parse_latency("lan").unwrap(), LAN);
        assert!(parse_latency("uniform:2ms,1ms").is_err());
        assert!(
            parse_latency("uniform:2ms")
                .unwrap_err()
                .contains("takes 2")
        );
        assert!(parse_latency("gaussian").unwrap_err().contains("unknown"));
    }

    #[test]
    fn process_counts_are_checked() {
        assert_eq!(parse_process_count("5"), Ok(5));
        assert!(parse_process_count("0").is_err());
        assert!(parse_process_count("65").is_err());
        assert!(parse_process_count("x").is_err());
    }
}
