//! Parsing of durations on the command line: `humantime`'s syntax, with messages that say
//! what is wrong and how to write one.

use std::time::Duration;

/// How to write a duration, appended to every refusal.
const DURATION_EXAMPLE: &str =
    "write a number and a unit, e.g. 250us, 1.5ms, 2s or 1min (a bare 0 needs no unit)";

/// The longest duration the command line accepts: a year, far beyond any useful run, and
/// small enough that no deadline computed from it overflows.
pub const MAX_DURATION: Duration = Duration::from_secs(86_400 * 365);

/// Why a duration on the command line was refused. Its message names the text, says what
/// was wrong and shows how to write one; clap prints it after the option's name.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DurationError {
    /// The text is not a duration (no unit, an unknown unit, a sign, not a number...).
    #[error("{text:?} is not a duration: {reason}; {DURATION_EXAMPLE}")]
    Malformed {
        /// The text as given.
        text: String,
        /// What `humantime` found wrong with it.
        reason: humantime::DurationError,
    },
    /// The text starts with a minus sign.
    #[error("{text:?} is negative, and a duration cannot be; {DURATION_EXAMPLE}")]
    Negative {
        /// The text as given.
        text: String,
    },
    /// The text is a duration, but longer than [`MAX_DURATION`].
    #[error("{text:?} is longer than a year, the longest duration accepted; {DURATION_EXAMPLE}")]
    TooLong {
        /// The text as given.
        text: String,
    },
}

/// Parses a duration in `humantime`'s syntax: a non-negative number (decimals allowed) and
/// a unit (`ns`, `us`, `µs`, `ms`, `s`, `min` or `m`, `h`, ...), possibly several
/// (`1s 500ms`); a bare `0` needs no unit. At most [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(DurationError::Negative {
            text: text.to_owned(),
        });
    }
    let duration = humantime::parse_duration(text).map_err(|reason| DurationError::Malformed {
        text: text.to_owned(),
        reason,
    })?;
    if duration > MAX_DURATION {
        return Err(DurationError::TooLong {
            text: text.to_owned(),
        });
    }
    Ok(duration)
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
        assert_eq!(parse_duration(" 1min "), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1s 500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("365days"), Ok(MAX_DURATION));
    }

    #[test]
    fn bad_durations_say_what_is_wrong_and_how_to_write_one() {
        for (text, complaint) in [
            ("5", "unit needed"),
            ("5 fortnights", "unknown time unit"),
            ("-5ms", "negative"),
            ("5ms!", "invalid character"),
            ("NaNs", "expected number"),
            ("", "empty"),
            ("99999999999999999999h", "too large"),
            ("366days", "longer than a year"),
        ] {
            let message = parse_duration(text).unwrap_err().to_string();
            assert!(message.contains(complaint), "{text:?}: {message}");
            assert!(message.contains("e.g. 250us"), "{text:?}: {message}");
        }
    }
}
