//! The errors the endpoint answers with, and their CQL error frames.

use cassandra_protocol::consistency::Consistency as WireConsistency;
use cassandra_protocol::frame::message_error::{
    AlreadyExistsError, ErrorBody, ErrorType, ReadTimeoutError, UnavailableError, UnpreparedError,
    WriteTimeoutError, WriteType,
};
use cassandra_protocol::frame::{FromCursor, Serialize, Version};
use cassandra_protocol::types::CBytesShort;
use std::io::Cursor;

use lock_storage_memory::{FailureDetail, RequestFailure};

/// Why a request got an ERROR frame instead of its answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CqlError {
    /// The statement is not valid CQL, or not CQL of the served grammar (0x2000).
    #[error("{0}")]
    Syntax(String),
    /// The statement is well-formed but refers to something missing, or asks for a
    /// feature this endpoint does not serve (0x2200).
    #[error("{0}")]
    Invalid(String),
    /// The frame breaks the protocol (0x000A).
    #[error("{0}")]
    Protocol(String),
    /// Too many request bytes are held already (0x1001): see
    /// [`CqlLimits::max_buffered_bytes`](crate::CqlLimits::max_buffered_bytes).
    #[error("{0}")]
    Overloaded(String),
    /// A bug on the server's side (0x0000).
    #[error("{0}")]
    Server(String),
    /// `CREATE` without `IF NOT EXISTS` of something that exists (0x2400).
    #[error("{message}")]
    AlreadyExists {
        message: String,
        keyspace: String,
        table: String,
    },
    /// An `EXECUTE` of an id this server never handed out (0x2500).
    #[error("prepared statement {} is unknown to this server", hex(id))]
    Unprepared { id: Vec<u8> },
    /// Too few replicas were alive (0x1000).
    #[error("{message}")]
    Unavailable {
        message: String,
        consistency: WireConsistency,
        required: usize,
        alive: usize,
    },
    /// A write timed out (0x1100).
    #[error("{message}")]
    WriteTimeout {
        message: String,
        consistency: WireConsistency,
        received: usize,
        block_for: usize,
    },
    /// A read timed out (0x1200).
    #[error("{message}")]
    ReadTimeout {
        message: String,
        consistency: WireConsistency,
        received: usize,
        block_for: usize,
        data_present: bool,
    },
}

impl CqlError {
    /// The error a failed simulator request becomes, `consistency` being the level the
    /// frame asked for.
    pub(crate) fn from_failure(failure: RequestFailure, consistency: WireConsistency) -> Self {
        let message = failure.error().to_string();
        match *failure.detail() {
            FailureDetail::Unavailable {
                required, alive, ..
            } => CqlError::Unavailable {
                message,
                consistency,
                required,
                alive,
            },
            FailureDetail::WriteTimeout {
                required, received, ..
            } => CqlError::WriteTimeout {
                message,
                consistency,
                received,
                block_for: required,
            },
            FailureDetail::ReadTimeout {
                required,
                received,
                data_present,
                ..
            } => CqlError::ReadTimeout {
                message,
                consistency,
                received,
                block_for: required,
                data_present,
            },
            _ => CqlError::Server(message),
        }
    }

    /// The error's body as `cassandra-protocol` encodes it.
    pub(crate) fn body(&self) -> ErrorBody {
        let message = cut_message(self.to_string());
        let count = |count: usize| i32::try_from(count).unwrap_or(i32::MAX);
        let ty = match self {
            CqlError::Syntax(_) => ErrorType::Syntax,
            CqlError::Invalid(_) => ErrorType::Invalid,
            CqlError::Protocol(_) => ErrorType::Protocol,
            CqlError::Server(_) => ErrorType::Server,
            CqlError::Overloaded(_) => ErrorType::Overloaded,
            CqlError::AlreadyExists {
                keyspace, table, ..
            } => ErrorType::AlreadyExists(AlreadyExistsError {
                ks: keyspace.clone(),
                table: table.clone(),
            }),
            CqlError::Unprepared { id } => ErrorType::Unprepared(UnpreparedError {
                id: CBytesShort::new(id.clone()),
            }),
            CqlError::Unavailable {
                consistency,
                required,
                alive,
                ..
            } => ErrorType::Unavailable(UnavailableError {
                cl: *consistency,
                required: count(*required),
                alive: count(*alive),
            }),
            CqlError::WriteTimeout {
                consistency,
                received,
                block_for,
                ..
            } => ErrorType::WriteTimeout(WriteTimeoutError {
                cl: *consistency,
                received: count(*received),
                block_for: count(*block_for),
                write_type: WriteType::Simple,
                contentions: None,
            }),
            CqlError::ReadTimeout {
                consistency,
                received,
                block_for,
                data_present,
                ..
            } => match read_timeout(
                *consistency,
                count(*received),
                count(*block_for),
                *data_present,
            ) {
                Some(error) => ErrorType::ReadTimeout(error),
                None => ErrorType::Server,
            },
        };
        ErrorBody { message, ty }
    }
}

/// The longest error message sent, in bytes. A `[string]` on the wire is at most 65,535
/// bytes (and `cassandra-protocol` writes a longer one's length wrong, breaking the
/// frame); messages quote the client's text, which may be megabytes long.
pub(crate) const MAX_MESSAGE_LEN: usize = 1024;

/// `message` cut to [`MAX_MESSAGE_LEN`] bytes at a character boundary, marked when cut.
fn cut_message(mut message: String) -> String {
    if message.len() > MAX_MESSAGE_LEN {
        let mut end = MAX_MESSAGE_LEN - 32;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let length = message.len();
        message.truncate(end);
        message.push_str(&format!("... ({length} bytes in all)"));
    }
    message
}

/// A read timeout's extras. `cassandra-protocol` keeps `data_present` private, so the
/// value is decoded from its own wire form.
fn read_timeout(
    consistency: WireConsistency,
    received: i32,
    block_for: i32,
    data_present: bool,
) -> Option<ReadTimeoutError> {
    let mut bytes = consistency.serialize_to_vec(Version::V4);
    bytes.extend_from_slice(&received.to_be_bytes());
    bytes.extend_from_slice(&block_for.to_be_bytes());
    bytes.push(u8::from(data_present));
    ReadTimeoutError::from_cursor(&mut Cursor::new(bytes.as_slice()), Version::V4).ok()
}

/// `bytes` as lowercase hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_carry_code_message_and_extras() {
        let unavailable = CqlError::Unavailable {
            message: "down".into(),
            consistency: WireConsistency::Quorum,
            required: 2,
            alive: 1,
        };
        let body = unavailable.body().serialize_to_vec(Version::V4);
        assert_eq!(
            body,
            [
                &[0, 0, 0x10, 0][..],
                &[0, 4],
                b"down",
                &[0, 4],
                &[0, 0, 0, 2],
                &[0, 0, 0, 1]
            ]
            .concat()
        );
        let syntax = CqlError::Syntax("bad".into())
            .body()
            .serialize_to_vec(Version::V4);
        assert_eq!(syntax, [&[0, 0, 0x20, 0][..], &[0, 3], b"bad"].concat());
        let invalid = CqlError::Invalid("x".into())
            .body()
            .serialize_to_vec(Version::V4);
        assert_eq!(&invalid[..4], &[0, 0, 0x22, 0]);
        let timeout = CqlError::WriteTimeout {
            message: String::new(),
            consistency: WireConsistency::LocalQuorum,
            received: 1,
            block_for: 2,
        }
        .body()
        .serialize_to_vec(Version::V4);
        assert_eq!(
            timeout,
            [
                &[0, 0, 0x11, 0][..],
                &[0, 0],
                &[0, 6],
                &[0, 0, 0, 1],
                &[0, 0, 0, 2],
                &[0, 6],
                b"SIMPLE"
            ]
            .concat()
        );
        let read = CqlError::ReadTimeout {
            message: String::new(),
            consistency: WireConsistency::One,
            received: 0,
            block_for: 1,
            data_present: false,
        }
        .body()
        .serialize_to_vec(Version::V4);
        assert_eq!(
            read,
            [
                &[0, 0, 0x12, 0][..],
                &[0, 0],
                &[0, 1],
                &[0, 0, 0, 0],
                &[0, 0, 0, 1],
                &[0]
            ]
            .concat()
        );
    }
}
