//! Parsing of the command line's latency models, and its durations (from
//! `lock-cli-support`).

use std::time::Duration;

use lock_storage_memory::Latency;

pub use lock_cli_support::duration::{DurationError, MAX_DURATION, parse_duration};

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
        parts
            .into_iter()
            .map(|part| parse_duration(part).map_err(|error| format!("latency {text:?}: {error}")))
            .collect()
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

/// Milliseconds as a float, for reports.
pub fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
