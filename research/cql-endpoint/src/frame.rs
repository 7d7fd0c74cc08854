//! Frames: the 9-byte v4 header, the request bodies the endpoint reads, and the response
//! envelopes it writes.
//!
//! Responses are built and encoded with `cassandra-protocol` (its result, error and
//! envelope types). Requests are decoded here, with every length checked against what is
//! left of the frame: `cassandra-protocol`'s request decoders index past the end of a
//! truncated string and allocate from negative counts, which would let a malformed frame
//! panic the server. The unit tests check this decoder against `cassandra-protocol`'s
//! request encoders.

use std::collections::BTreeMap;

use cassandra_protocol::compression::Compression;
use cassandra_protocol::frame::{Direction, Envelope, Flags, Opcode, Serialize, Version};

use crate::error::CqlError;
use crate::value::RawValue;

/// The length of a v4 frame header.
pub(crate) const HEADER_LEN: usize = 9;

/// The largest frame body accepted by default (Cassandra's
/// `native_transport_max_frame_size`); see [`CqlLimits::max_body_bytes`](crate::CqlLimits::max_body_bytes).
pub(crate) const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// A request frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    /// The version byte, direction bit included.
    pub(crate) version: u8,
    pub(crate) flags: u8,
    pub(crate) stream: i16,
    pub(crate) opcode: u8,
    pub(crate) length: usize,
}

/// Why a header cannot be read; the connection cannot continue after any of these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BadHeader {
    /// Not protocol v4: the answer must be a protocol error in a version the client reads.
    Version(u8),
    /// The length field is negative or larger than the limit, `max`.
    Length {
        /// The length the header announced.
        length: i32,
        /// The longest body accepted.
        max: usize,
    },
}

impl BadHeader {
    /// The protocol error that answers the header.
    pub(crate) fn error(&self) -> CqlError {
        match self {
            BadHeader::Version(version) => protocol(format!(
                "Invalid or unsupported protocol version ({}); supported versions are (4/v4)",
                version & 0x7f
            )),
            BadHeader::Length { length, max } => protocol(format!(
                "invalid frame body length {length} (at most {max} bytes)"
            )),
        }
    }
}

impl Header {
    /// Reads a header whose body may be at most `max_body` bytes; the body follows it.
    pub(crate) fn parse(bytes: &[u8; HEADER_LEN], max_body: usize) -> Result<Header, BadHeader> {
        let [version, flags, s0, s1, opcode, l0, l1, l2, l3] = *bytes;
        if version & 0x7f != 4 {
            return Err(BadHeader::Version(version));
        }
        let length = i32::from_be_bytes([l0, l1, l2, l3]);
        let length = usize::try_from(length)
            .ok()
            .filter(|length| *length <= max_body)
            .ok_or(BadHeader::Length {
                length,
                max: max_body,
            })?;
        Ok(Header {
            version,
            flags,
            stream: i16::from_be_bytes([s0, s1]),
            opcode,
            length,
        })
    }
}

/// The parameters of a QUERY or EXECUTE.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct QueryParams {
    /// The consistency level's code.
    pub(crate) consistency: i16,
    pub(crate) values: Vec<RawValue>,
    /// The values' names, when the client sent them by name.
    pub(crate) names: Option<Vec<String>>,
    pub(crate) skip_metadata: bool,
    pub(crate) page_size: Option<i32>,
    pub(crate) paging_state: Option<Vec<u8>>,
    pub(crate) serial_consistency: Option<i16>,
    pub(crate) default_timestamp: Option<i64>,
}

/// A decoded request body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    Startup(BTreeMap<String, String>),
    Options,
    Query { query: String, params: QueryParams },
    Prepare { query: String },
    Execute { id: Vec<u8>, params: QueryParams },
    Batch,
    Register(Vec<String>),
    AuthResponse,
}

const STARTUP: u8 = 0x01;
const OPTIONS: u8 = 0x05;
const QUERY: u8 = 0x07;
const PREPARE: u8 = 0x09;
const EXECUTE: u8 = 0x0A;
const REGISTER: u8 = 0x0B;
const BATCH: u8 = 0x0D;
const AUTH_RESPONSE: u8 = 0x0F;

/// Reads the body of a request with `header`; errors are protocol errors.
pub(crate) fn decode_request(header: &Header, body: &[u8]) -> Result<Request, CqlError> {
    if header.version & 0x80 != 0 {
        return Err(protocol("a response frame was sent to the server"));
    }
    let unsupported = header.flags & !Flags::TRACING.bits();
    if unsupported != 0 {
        return Err(protocol(format!(
            "unsupported frame flags {unsupported:#04x}: this server negotiates no compression \
             and takes no custom payloads or beta protocol"
        )));
    }
    if header.flags & Flags::TRACING.bits() != 0 {
        return Err(protocol("request tracing is not supported by this server"));
    }
    let mut reader = Reader { rest: body };
    let request = match header.opcode {
        STARTUP => Request::Startup(reader.string_map()?),
        OPTIONS => Request::Options,
        QUERY => {
            let query = reader.long_string()?;
            let params = reader.query_params()?;
            Request::Query { query, params }
        }
        PREPARE => Request::Prepare {
            query: reader.long_string()?,
        },
        EXECUTE => {
            let id = reader.short_bytes()?;
            let params = reader.query_params()?;
            Request::Execute { id, params }
        }
        REGISTER => Request::Register(reader.string_list()?),
        // Neither is read: batches are refused whole, and no authentication is asked for.
        BATCH => return Ok(Request::Batch),
        AUTH_RESPONSE => return Ok(Request::AuthResponse),
        other => return Err(protocol(format!("unknown or response opcode {other:#04x}"))),
    };
    if !reader.rest.is_empty() {
        return Err(protocol(format!(
            "{} unexpected bytes after the request body",
            reader.rest.len()
        )));
    }
    Ok(request)
}

fn protocol(message: impl Into<String>) -> CqlError {
    CqlError::Protocol(message.into())
}

/// A cursor over a request body whose every read is bounds-checked.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize, what: &str) -> Result<&'a [u8], CqlError> {
        if self.rest.len() < count {
            return Err(protocol(format!(
                "truncated frame: {what} needs {count} bytes, {} left",
                self.rest.len()
            )));
        }
        let (head, tail) = self.rest.split_at(count);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], CqlError> {
        let bytes = self.take(N, what)?;
        bytes
            .try_into()
            .map_err(|_| protocol(format!("truncated frame: {what}")))
    }

    fn byte(&mut self, what: &str) -> Result<u8, CqlError> {
        Ok(self.array::<1>(what)?[0])
    }

    fn short(&mut self, what: &str) -> Result<u16, CqlError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    fn int(&mut self, what: &str) -> Result<i32, CqlError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    fn long(&mut self, what: &str) -> Result<i64, CqlError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    fn utf8(bytes: &[u8], what: &str) -> Result<String, CqlError> {
        String::from_utf8(bytes.to_vec()).map_err(|_| protocol(format!("{what} is not UTF-8")))
    }

    fn string(&mut self, what: &str) -> Result<String, CqlError> {
        let length = usize::from(self.short(what)?);
        Self::utf8(self.take(length, what)?, what)
    }

    fn long_string(&mut self) -> Result<String, CqlError> {
        let length = self.int("the query string's length")?;
        let length = usize::try_from(length)
            .map_err(|_| protocol(format!("negative query string length {length}")))?;
        Self::utf8(self.take(length, "the query string")?, "the query string")
    }

    fn short_bytes(&mut self) -> Result<Vec<u8>, CqlError> {
        let length = usize::from(self.short("the statement id's length")?);
        Ok(self.take(length, "the statement id")?.to_vec())
    }

    fn value(&mut self) -> Result<RawValue, CqlError> {
        match self.int("a value's length")? {
            -1 => Ok(RawValue::Null),
            -2 => Ok(RawValue::Unset),
            length => {
                let length = usize::try_from(length)
                    .map_err(|_| protocol(format!("invalid value length {length}")))?;
                Ok(RawValue::Bytes(self.take(length, "a value")?.to_vec()))
            }
        }
    }

    fn string_map(&mut self) -> Result<BTreeMap<String, String>, CqlError> {
        let count = self.short("the option count")?;
        let mut map = BTreeMap::new();
        for _ in 0..count {
            let key = self.string("an option name")?;
            let value = self.string("an option value")?;
            map.insert(key, value);
        }
        Ok(map)
    }

    fn string_list(&mut self) -> Result<Vec<String>, CqlError> {
        let count = self.short("the list length")?;
        (0..count).map(|_| self.string("a list item")).collect()
    }

    fn query_params(&mut self) -> Result<QueryParams, CqlError> {
        const VALUES: u8 = 0x01;
        const SKIP_METADATA: u8 = 0x02;
        const PAGE_SIZE: u8 = 0x04;
        const PAGING_STATE: u8 = 0x08;
        const SERIAL_CONSISTENCY: u8 = 0x10;
        const DEFAULT_TIMESTAMP: u8 = 0x20;
        const NAMES: u8 = 0x40;
        let consistency = self.short("the consistency")? as i16;
        let flags = self.byte("the query flags")?;
        if flags & 0x80 != 0 {
            return Err(protocol(format!(
                "unknown query flags {:#04x}",
                flags & 0x80
            )));
        }
        let mut params = QueryParams {
            consistency,
            skip_metadata: flags & SKIP_METADATA != 0,
            ..QueryParams::default()
        };
        if flags & VALUES != 0 {
            let count = self.short("the value count")?;
            let mut names = Vec::new();
            for _ in 0..count {
                if flags & NAMES != 0 {
                    names.push(self.string("a value name")?);
                }
                params.values.push(self.value()?);
            }
            if flags & NAMES != 0 {
                params.names = Some(names);
            }
        }
        if flags & PAGE_SIZE != 0 {
            params.page_size = Some(self.int("the page size")?);
        }
        if flags & PAGING_STATE != 0 {
            params.paging_state = match self.value()? {
                RawValue::Bytes(state) => Some(state),
                RawValue::Null | RawValue::Unset => None,
            };
        }
        if flags & SERIAL_CONSISTENCY != 0 {
            params.serial_consistency = Some(self.short("the serial consistency")? as i16);
        }
        if flags & DEFAULT_TIMESTAMP != 0 {
            params.default_timestamp = Some(self.long("the default timestamp")?);
        }
        Ok(params)
    }
}

/// A response envelope for `stream`, encoded for the wire; `warnings` ride along with the
/// WARNING flag.
pub(crate) fn encode_response(
    stream: i16,
    opcode: Opcode,
    body: Vec<u8>,
    warnings: Vec<String>,
) -> Vec<u8> {
    let flags = if warnings.is_empty() {
        Flags::empty()
    } else {
        Flags::WARNING
    };
    let envelope = Envelope::new(
        Version::V4,
        Direction::Response,
        flags,
        opcode,
        stream,
        body,
        None,
        warnings,
    );
    // Encoding fails only for a tracing flag without a tracing id, never set here.
    envelope
        .encode_with(Compression::None)
        .unwrap_or_else(|_| plain_error_frame(stream, "the response could not be encoded"))
}

/// An ERROR frame for `stream`.
pub(crate) fn error_frame(stream: i16, error: &CqlError) -> Vec<u8> {
    let body = error.body().serialize_to_vec(Version::V4);
    encode_response(stream, Opcode::Error, body, Vec::new())
}

/// A server error frame built by hand, for when encoding itself failed.
fn plain_error_frame(stream: i16, message: &str) -> Vec<u8> {
    let message = &message.as_bytes()[..message.len().min(1024)];
    let length = u16::try_from(message.len()).unwrap_or(0);
    let mut frame = vec![0x84, 0];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.push(0x00);
    frame.extend_from_slice(&(u32::from(length) + 6).to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0, 0]);
    frame.extend_from_slice(&length.to_be_bytes());
    frame.extend_from_slice(&message[..usize::from(length)]);
    frame
}

/// The SUPPORTED body: a `[string multimap]` (`cassandra-protocol` only decodes it).
pub(crate) fn supported_body(options: &[(&str, &[&str])]) -> Vec<u8> {
    let mut body = Vec::new();
    let string = |body: &mut Vec<u8>, text: &str| {
        body.extend_from_slice(&u16::try_from(text.len()).unwrap_or(0).to_be_bytes());
        body.extend_from_slice(text.as_bytes());
    };
    body.extend_from_slice(&u16::try_from(options.len()).unwrap_or(0).to_be_bytes());
    for (key, values) in options {
        string(&mut body, key);
        body.extend_from_slice(&u16::try_from(values.len()).unwrap_or(0).to_be_bytes());
        for value in *values {
            string(&mut body, value);
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use cassandra_protocol::consistency::Consistency;
    use cassandra_protocol::frame::events::SimpleServerEvent;
    use cassandra_protocol::frame::message_prepare::BodyReqPrepare;
    use cassandra_protocol::frame::message_query::BodyReqQuery;
    use cassandra_protocol::frame::message_register::BodyReqRegister;
    use cassandra_protocol::frame::message_startup::BodyReqStartup;
    use cassandra_protocol::query::{QueryParams as ProtocolParams, QueryValues};
    use cassandra_protocol::types::value::Value;

    use super::*;

    fn header(opcode: u8, length: usize) -> Header {
        Header {
            version: 4,
            flags: 0,
            stream: 1,
            opcode,
            length,
        }
    }

    fn decode(opcode: u8, body: &[u8]) -> Result<Request, CqlError> {
        decode_request(&header(opcode, body.len()), body)
    }

    #[test]
    fn headers_are_checked() {
        let max = DEFAULT_MAX_BODY_BYTES;
        let good = [4, 0, 0, 7, QUERY, 0, 0, 0, 3];
        assert_eq!(Header::parse(&good, max).unwrap().stream, 7);
        assert_eq!(Header::parse(&good, max).unwrap().length, 3);
        assert_eq!(
            Header::parse(&[5, 0, 0, 7, QUERY, 0, 0, 0, 3], max),
            Err(BadHeader::Version(5))
        );
        assert_eq!(
            Header::parse(&[4, 0, 0, 7, QUERY, 0xff, 0xff, 0xff, 0xff], max),
            Err(BadHeader::Length { length: -1, max })
        );
        assert!(Header::parse(&[4, 0, 0, 7, QUERY, 0x7f, 0, 0, 0], max).is_err());
        assert_eq!(
            Header::parse(&[4, 0, 0, 7, QUERY, 0, 0, 0, 3], 2),
            Err(BadHeader::Length { length: 3, max: 2 })
        );
    }

    #[test]
    fn query_frames_from_cassandra_protocol_decode_the_same() {
        let body = BodyReqQuery {
            query: "SELECT * FROM t".into(),
            query_params: ProtocolParams {
                consistency: Consistency::LocalQuorum,
                values: Some(QueryValues::SimpleValues(vec![
                    Value::new("a"),
                    Value::Null,
                    Value::NotSet,
                    Value::new(7_i32),
                ])),
                page_size: Some(100),
                timestamp: Some(-5),
                serial_consistency: Some(Consistency::LocalSerial),
                ..ProtocolParams::default()
            },
        }
        .serialize_to_vec(Version::V4);
        let Request::Query { query, params } = decode(QUERY, &body).unwrap() else {
            panic!("not a query");
        };
        assert_eq!(query, "SELECT * FROM t");
        assert_eq!(params.consistency, 6);
        assert_eq!(
            params.values,
            [
                RawValue::Bytes(b"a".to_vec()),
                RawValue::Null,
                RawValue::Unset,
                RawValue::Bytes(vec![0, 0, 0, 7])
            ]
        );
        assert_eq!(params.page_size, Some(100));
        assert_eq!(params.default_timestamp, Some(-5));
        assert_eq!(params.serial_consistency, Some(9));
        assert_eq!(params.names, None);
    }

    #[test]
    fn named_values_keep_their_names() {
        let mut named = HashMap::new();
        named.insert("lock_id".to_owned(), Value::new("l"));
        let body = BodyReqQuery {
            query: "q".into(),
            query_params: ProtocolParams {
                values: Some(QueryValues::NamedValues(named)),
                with_names: true,
                ..ProtocolParams::default()
            },
        }
        .serialize_to_vec(Version::V4);
        let Request::Query { params, .. } = decode(QUERY, &body).unwrap() else {
            panic!("not a query");
        };
        assert_eq!(params.names, Some(vec!["lock_id".to_owned()]));
    }

    #[test]
    fn other_requests_decode() {
        let startup = BodyReqStartup::new(None, Version::V4).serialize_to_vec(Version::V4);
        let Request::Startup(options) = decode(STARTUP, &startup).unwrap() else {
            panic!("not a startup");
        };
        assert_eq!(
            options.get("CQL_VERSION").map(String::as_str),
            Some("3.0.0")
        );
        let prepare = BodyReqPrepare::new("SELECT 1".into(), None).serialize_to_vec(Version::V4);
        assert_eq!(
            decode(PREPARE, &prepare).unwrap(),
            Request::Prepare {
                query: "SELECT 1".into()
            }
        );
        let register = BodyReqRegister {
            events: vec![SimpleServerEvent::SchemaChange],
        }
        .serialize_to_vec(Version::V4);
        assert_eq!(
            decode(REGISTER, &register).unwrap(),
            Request::Register(vec!["SCHEMA_CHANGE".into()])
        );
        assert_eq!(decode(OPTIONS, &[]).unwrap(), Request::Options);
        let execute = [&[0, 2, 0xab, 0xcd][..], &[0, 4, 0]].concat();
        assert_eq!(
            decode(EXECUTE, &execute).unwrap(),
            Request::Execute {
                id: vec![0xab, 0xcd],
                params: QueryParams {
                    consistency: 4,
                    ..QueryParams::default()
                }
            }
        );
    }

    #[test]
    fn malformed_bodies_are_protocol_errors_not_panics() {
        let cases: &[(u8, &[u8])] = &[
            (QUERY, &[0, 0, 0, 10, b'a']),
            (QUERY, &[0xff, 0xff, 0xff, 0xff]),
            (QUERY, &[0, 0, 0, 1, b'a', 0, 4, 0x01, 0xff, 0xff]),
            (
                QUERY,
                &[0, 0, 0, 1, b'a', 0, 4, 0x01, 0, 1, 0xff, 0xff, 0xff, 0xfd],
            ),
            (QUERY, &[0, 0, 0, 1, b'a', 0, 4, 0x80]),
            (QUERY, &[0, 0, 0, 1, 0xff, 0, 4, 0]),
            (QUERY, &[0, 0, 0, 1, b'a', 0, 4, 0, 9]),
            (STARTUP, &[0xff, 0xff]),
            (STARTUP, &[0, 1, 0, 5, b'a']),
            (REGISTER, &[0x80, 0]),
            (EXECUTE, &[0, 9, 1]),
            (0x02, &[]),
            (0x42, &[]),
        ];
        for (opcode, body) in cases {
            match decode(*opcode, body) {
                Err(CqlError::Protocol(_)) => {}
                other => panic!("{opcode:#x} {body:?}: {other:?}"),
            }
        }
        let flagged = Header {
            flags: Flags::COMPRESSION.bits(),
            ..header(OPTIONS, 0)
        };
        assert!(decode_request(&flagged, &[]).is_err());
        let response = Header {
            version: 0x84,
            ..header(OPTIONS, 0)
        };
        assert!(decode_request(&response, &[]).is_err());
    }

    #[test]
    fn responses_are_v4_response_envelopes() {
        let frame = encode_response(3, Opcode::Ready, Vec::new(), Vec::new());
        assert_eq!(frame, [0x84, 0, 0, 3, 0x02, 0, 0, 0, 0]);
        let warned = encode_response(3, Opcode::Ready, Vec::new(), vec!["w".into()]);
        assert_eq!(
            warned,
            [0x84, 0x08, 0, 3, 0x02, 0, 0, 0, 5, 0, 1, 0, 1, b'w']
        );
        let error = error_frame(-1, &CqlError::Protocol("p".into()));
        assert_eq!(
            error,
            [
                0x84, 0, 0xff, 0xff, 0x00, 0, 0, 0, 7, 0, 0, 0, 0x0a, 0, 1, b'p'
            ]
        );
        assert_eq!(
            plain_error_frame(1, "m"),
            [0x84, 0, 0, 1, 0x00, 0, 0, 0, 7, 0, 0, 0, 0, 0, 1, b'm']
        );
        assert_eq!(
            supported_body(&[("A", &["x", "y"])]),
            [0, 1, 0, 1, b'A', 0, 2, 0, 1, b'x', 0, 1, b'y']
        );
    }
}
