//! A strict parser for the CQL this endpoint serves.
//!
//! The `cql3-parser` crate was tried first: it silently drops `USING TTL ? AND
//! TIMESTAMP ?`, `USING TIMESTAMP ?` on DELETE, `LIMIT ?`, `IN ?` and table options such
//! as `gc_grace_seconds`, which is exactly the failure this endpoint exists to avoid. So
//! the grammar is parsed here, and nothing is skipped: text that is not CQL is a
//! [`ParseError::Syntax`], and CQL this endpoint does not serve (conditions, `ORDER BY`,
//! `UPDATE`, batches, ...) is a [`ParseError::Unsupported`] that names the feature.
//!
//! Served statements:
//!
//! ```text
//! SELECT (* | selector [, selector]*) FROM [ks.]table [WHERE relation [AND relation]*] [LIMIT term]
//!     selector = column | WRITETIME(column) | TTL(column)
//!     relation = column (= | < | <= | > | >=) term | column IN (? | (term [, term]*))
//! INSERT INTO [ks.]table (column, ...) VALUES (term, ...) [USING (TTL | TIMESTAMP) term [AND ...]]
//! DELETE FROM [ks.]table [USING TIMESTAMP term] WHERE relation [AND relation]*
//! CREATE KEYSPACE [IF NOT EXISTS] ks WITH property [AND property]*
//! CREATE TABLE [IF NOT EXISTS] [ks.]table (column type, ..., PRIMARY KEY (...)) [WITH ...]
//! DROP KEYSPACE [IF EXISTS] ks
//! DROP TABLE [IF EXISTS] [ks.]table
//! USE ks
//!     term = ? | 'string' | integer | 0xhex | true | false
//! ```

use std::fmt;

/// The deepest nesting of types (`frozen<list<...>>`) parsed; deeper is refused, so that
/// the recursive descent cannot overflow a stack.
pub(crate) const MAX_TYPE_DEPTH: usize = 32;

/// Why a statement cannot be served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ParseError {
    /// Not CQL (a syntax error).
    Syntax(String),
    /// CQL, but a statement or clause this endpoint does not serve.
    Unsupported(String),
}

/// A statement, as parsed.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Statement {
    Select(Select),
    Insert(Insert),
    Delete(Delete),
    CreateKeyspace(CreateKeyspace),
    CreateTable(CreateTable),
    DropKeyspace { name: String, if_exists: bool },
    DropTable { table: TableName, if_exists: bool },
    Use(String),
}

/// `[keyspace.]table`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TableName {
    pub(crate) keyspace: Option<String>,
    pub(crate) name: String,
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.keyspace {
            Some(keyspace) => write!(f, "{keyspace}.{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// A value in a statement: a bind marker (numbered from 0 in order of appearance) or a
/// literal.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Term {
    Bind(usize),
    Text(String),
    Integer(i64),
    Blob(Vec<u8>),
    Boolean(bool),
    /// `(term, ...)` after `IN`.
    List(Vec<Term>),
}

/// One item of a SELECT's selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Selector {
    Column(String),
    WriteTime(String),
    Ttl(String),
}

/// A comparison operator of a WHERE relation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operator {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
    In,
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operator::Eq => "=",
            Operator::Lt => "<",
            Operator::Le => "<=",
            Operator::Gt => ">",
            Operator::Ge => ">=",
            Operator::In => "IN",
        })
    }
}

/// `column op term`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Relation {
    pub(crate) column: String,
    pub(crate) operator: Operator,
    pub(crate) value: Term,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Select {
    /// `None` for `*`.
    pub(crate) selectors: Option<Vec<Selector>>,
    pub(crate) table: TableName,
    pub(crate) relations: Vec<Relation>,
    pub(crate) limit: Option<Term>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Insert {
    pub(crate) table: TableName,
    pub(crate) columns: Vec<String>,
    pub(crate) values: Vec<Term>,
    pub(crate) ttl: Option<Term>,
    pub(crate) timestamp: Option<Term>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Delete {
    pub(crate) table: TableName,
    pub(crate) timestamp: Option<Term>,
    pub(crate) relations: Vec<Relation>,
}

/// A constant in a keyspace or table property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Constant {
    Text(String),
    /// A number, as written.
    Number(String),
    Boolean(bool),
}

impl Constant {
    /// The constant as text, as Cassandra stores property values.
    pub(crate) fn as_text(&self) -> String {
        match self {
            Constant::Text(text) | Constant::Number(text) => text.clone(),
            Constant::Boolean(value) => value.to_string(),
        }
    }
}

/// The value of a `name = value` property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Property {
    Constant(Constant),
    Map(Vec<(Constant, Constant)>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CreateKeyspace {
    pub(crate) name: String,
    pub(crate) if_not_exists: bool,
    pub(crate) properties: Vec<(String, Property)>,
}

/// Clustering order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    Asc,
    Desc,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CreateTable {
    pub(crate) table: TableName,
    pub(crate) if_not_exists: bool,
    /// Columns and their types, as written (lowercase, no spaces).
    pub(crate) columns: Vec<(String, String)>,
    pub(crate) partition_key: Vec<String>,
    pub(crate) clustering: Vec<String>,
    pub(crate) clustering_order: Vec<(String, Order)>,
    pub(crate) properties: Vec<(String, Property)>,
}

/// A parsed statement and how many bind markers (`?`) it has.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Parsed {
    pub(crate) statement: Statement,
    pub(crate) bind_markers: usize,
}

/// Parses one statement (an optional trailing `;` is allowed).
pub(crate) fn parse(text: &str) -> Result<Parsed, ParseError> {
    let tokens = tokenize(text)?;
    let mut parser = Parser {
        tokens,
        position: 0,
        binds: 0,
    };
    let statement = parser.statement()?;
    parser.eat_symbol(";");
    match parser.peek() {
        None => Ok(Parsed {
            statement,
            bind_markers: parser.binds,
        }),
        Some(token) => Err(parser.unexpected(token, "the end of the statement")),
    }
}

// ----- tokens -------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    /// An unquoted word, lowercased (CQL folds unquoted names and keywords).
    Word(String),
    /// A `"quoted"` identifier, case kept.
    Quoted(String),
    Text(String),
    Number(String),
    Hex(Vec<u8>),
    Bind,
    Symbol(&'static str),
}

#[derive(Clone, Debug, PartialEq)]
struct Token {
    kind: Kind,
    /// Where it starts: line and column, from 1.
    line: usize,
    column: usize,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Word(word) => write!(f, "'{word}'"),
            Kind::Quoted(name) => write!(f, "'\"{name}\"'"),
            Kind::Text(text) => write!(f, "string literal '{text}'"),
            Kind::Number(number) => write!(f, "'{number}'"),
            Kind::Hex(_) => f.write_str("blob literal"),
            Kind::Bind => f.write_str("'?'"),
            Kind::Symbol(symbol) => write!(f, "'{symbol}'"),
        }
    }
}

const SYMBOLS: [&str; 17] = [
    "<=", ">=", "!=", "(", ")", ",", ".", ";", "=", "<", ">", "{", "}", "[", "]", ":", "*",
];

fn tokenize(text: &str) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut tokens = Vec::new();
    // `line_start` is the index in `chars` where the line starts, so that a column is
    // one subtraction (counting from the line's start made tokenising quadratic).
    let (mut line, mut line_start) = (1, 0);
    let mut index = 0;
    while let Some(&(_, c)) = chars.get(index) {
        let column = index - line_start + 1;
        let at = |kind| Token { kind, line, column };
        let next = chars.get(index + 1).map(|&(_, c)| c);
        if c == '\n' {
            line += 1;
            index += 1;
            line_start = index;
        } else if c.is_whitespace() {
            index += 1;
        } else if (c == '-' && next == Some('-')) || (c == '/' && next == Some('/')) {
            while chars.get(index).is_some_and(|&(_, c)| c != '\n') {
                index += 1;
            }
        } else if c == '/' && next == Some('*') {
            index += 2;
            loop {
                match (chars.get(index), chars.get(index + 1)) {
                    (Some((_, '*')), Some((_, '/'))) => break index += 2,
                    (Some((_, '\n')), _) => {
                        line += 1;
                        index += 1;
                        line_start = index;
                    }
                    (Some(_), _) => index += 1,
                    (None, _) => {
                        return Err(ParseError::Syntax(format!(
                            "line {line}:{column} unterminated comment"
                        )));
                    }
                }
            }
        } else if c == '\'' || c == '"' {
            let mut value = String::new();
            index += 1;
            loop {
                match chars.get(index) {
                    Some(&(_, q)) if q == c && chars.get(index + 1).map(|x| x.1) == Some(c) => {
                        value.push(c);
                        index += 2;
                    }
                    Some(&(_, q)) if q == c => {
                        index += 1;
                        break;
                    }
                    Some(&(_, other)) => {
                        value.push(other);
                        index += 1;
                    }
                    None => {
                        return Err(ParseError::Syntax(format!(
                            "line {line}:{column} unterminated {}",
                            if c == '\'' {
                                "string"
                            } else {
                                "quoted identifier"
                            }
                        )));
                    }
                }
            }
            tokens.push(at(if c == '\'' {
                Kind::Text(value)
            } else {
                Kind::Quoted(value)
            }));
        } else if c == '0' && matches!(next, Some('x' | 'X')) {
            let start = index + 2;
            index = start;
            while chars
                .get(index)
                .is_some_and(|&(_, c)| c.is_ascii_hexdigit())
            {
                index += 1;
            }
            let digits: String = chars[start..index].iter().map(|&(_, c)| c).collect();
            let bytes = hex_bytes(&digits).ok_or_else(|| {
                ParseError::Syntax(format!(
                    "line {line}:{column} a blob literal needs an even number of hex digits"
                ))
            })?;
            tokens.push(at(Kind::Hex(bytes)));
        } else if c.is_ascii_digit() || (c == '-' && next.is_some_and(|next| next.is_ascii_digit()))
        {
            let start = index;
            index += 1;
            while chars
                .get(index)
                .is_some_and(|&(_, c)| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            {
                index += 1;
            }
            tokens.push(at(Kind::Number(
                chars[start..index].iter().map(|&(_, c)| c).collect(),
            )));
        } else if c.is_ascii_alphabetic() {
            let start = index;
            while chars
                .get(index)
                .is_some_and(|&(_, c)| c.is_ascii_alphanumeric() || c == '_')
            {
                index += 1;
            }
            let word: String = chars[start..index].iter().map(|&(_, c)| c).collect();
            tokens.push(at(Kind::Word(word.to_ascii_lowercase())));
        } else if c == '?' {
            index += 1;
            tokens.push(at(Kind::Bind));
        } else if let Some(symbol) = SYMBOLS.iter().find(|symbol| {
            let mut symbol_chars = symbol.chars();
            symbol_chars.next() == Some(c)
                && symbol_chars
                    .next()
                    .is_none_or(|second| next == Some(second))
        }) {
            index += symbol.len();
            tokens.push(at(Kind::Symbol(symbol)));
        } else {
            return Err(ParseError::Syntax(format!(
                "line {line}:{column} unexpected character '{c}'"
            )));
        }
    }
    Ok(tokens)
}

fn hex_bytes(digits: &str) -> Option<Vec<u8>> {
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    (0..digits.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(digits.get(at..at + 2)?, 16).ok())
        .collect()
}

// ----- the parser ---------------------------------------------------------------------

struct Parser {
    tokens: Vec<Token>,
    position: usize,
    binds: usize,
}

/// Statement keywords of CQL that this endpoint does not serve.
const UNSUPPORTED_STATEMENTS: [&str; 12] = [
    "update", "begin", "apply", "truncate", "alter", "grant", "revoke", "list", "describe", "desc",
    "batch", "login",
];

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.position)
    }

    fn peek_word(&self) -> Option<&str> {
        match self.peek() {
            Some(Token {
                kind: Kind::Word(word),
                ..
            }) => Some(word),
            _ => None,
        }
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.position).cloned();
        self.position += 1;
        token
    }

    fn unexpected(&self, token: &Token, expected: &str) -> ParseError {
        ParseError::Syntax(format!(
            "line {}:{} mismatched input {token} expecting {expected}",
            token.line, token.column
        ))
    }

    fn end_of_input(&self, expected: &str) -> ParseError {
        ParseError::Syntax(format!("unexpected end of statement, expecting {expected}"))
    }

    fn expected(&mut self, expected: &str) -> ParseError {
        match self.peek() {
            Some(token) => self.unexpected(token, expected),
            None => self.end_of_input(expected),
        }
    }

    fn eat_word(&mut self, word: &str) -> bool {
        if self.peek_word() == Some(word) {
            self.position += 1;
            true
        } else {
            false
        }
    }

    fn expect_word(&mut self, word: &str) -> Result<(), ParseError> {
        if self.eat_word(word) {
            Ok(())
        } else {
            Err(self.expected(&word.to_ascii_uppercase()))
        }
    }

    fn eat_symbol(&mut self, symbol: &str) -> bool {
        if matches!(self.peek(), Some(Token { kind: Kind::Symbol(s), .. }) if *s == symbol) {
            self.position += 1;
            true
        } else {
            false
        }
    }

    fn expect_symbol(&mut self, symbol: &str) -> Result<(), ParseError> {
        if self.eat_symbol(symbol) {
            Ok(())
        } else {
            Err(self.expected(&format!("'{symbol}'")))
        }
    }

    fn identifier(&mut self, what: &str) -> Result<String, ParseError> {
        match self.peek().map(|token| &token.kind) {
            Some(Kind::Word(word)) if !is_reserved(word) => {
                let word = word.clone();
                self.position += 1;
                Ok(word)
            }
            Some(Kind::Quoted(name)) => {
                let name = name.clone();
                self.position += 1;
                Ok(name)
            }
            _ => Err(self.expected(what)),
        }
    }

    fn table_name(&mut self) -> Result<TableName, ParseError> {
        let first = self.identifier("a table name")?;
        if self.eat_symbol(".") {
            Ok(TableName {
                keyspace: Some(first),
                name: self.identifier("a table name")?,
            })
        } else {
            Ok(TableName {
                keyspace: None,
                name: first,
            })
        }
    }

    fn if_not_exists(&mut self) -> Result<bool, ParseError> {
        if self.eat_word("if") {
            self.expect_word("not")?;
            self.expect_word("exists")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn if_exists(&mut self) -> Result<bool, ParseError> {
        if self.eat_word("if") {
            self.expect_word("exists")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn statement(&mut self) -> Result<Statement, ParseError> {
        let Some(word) = self.peek_word().map(str::to_owned) else {
            return Err(self.expected("a statement"));
        };
        self.position += 1;
        match word.as_str() {
            "select" => self.select().map(Statement::Select),
            "insert" => self.insert().map(Statement::Insert),
            "delete" => self.delete().map(Statement::Delete),
            "create" => self.create(),
            "drop" => self.drop(),
            "use" => Ok(Statement::Use(self.identifier("a keyspace name")?)),
            other if UNSUPPORTED_STATEMENTS.contains(&other) => {
                Err(ParseError::Unsupported(format!(
                    "{} statements are not supported by this endpoint, which serves SELECT, \
                     INSERT and DELETE on the lock table, CREATE/DROP KEYSPACE and TABLE, USE \
                     and the system tables a driver reads",
                    other.to_ascii_uppercase()
                )))
            }
            _ => {
                self.position -= 1;
                Err(self.expected("a statement"))
            }
        }
    }

    // ----- SELECT --------------------------------------------------------------------

    fn select(&mut self) -> Result<Select, ParseError> {
        for word in ["json", "distinct"] {
            if self.eat_word(word) {
                return Err(ParseError::Unsupported(format!(
                    "SELECT {} is not supported by this endpoint",
                    word.to_ascii_uppercase()
                )));
            }
        }
        let selectors = if self.eat_symbol("*") {
            None
        } else {
            let mut selectors = vec![self.selector()?];
            while self.eat_symbol(",") {
                selectors.push(self.selector()?);
            }
            Some(selectors)
        };
        self.expect_word("from")?;
        let table = self.table_name()?;
        let relations = if self.eat_word("where") {
            self.relations()?
        } else {
            Vec::new()
        };
        self.reject_clause("group", "GROUP BY")?;
        self.reject_clause(
            "order",
            "ORDER BY (rows always come in clustering order, column_name ASC)",
        )?;
        if self.peek_word() == Some("per") {
            return Err(ParseError::Unsupported(
                "PER PARTITION LIMIT is not supported by this endpoint".into(),
            ));
        }
        let limit = if self.eat_word("limit") {
            Some(self.term()?)
        } else {
            None
        };
        self.reject_clause("allow", "ALLOW FILTERING")?;
        Ok(Select {
            selectors,
            table,
            relations,
            limit,
        })
    }

    fn reject_clause(&mut self, word: &str, clause: &str) -> Result<(), ParseError> {
        if self.peek_word() == Some(word) {
            Err(ParseError::Unsupported(format!(
                "{clause} is not supported by this endpoint"
            )))
        } else {
            Ok(())
        }
    }

    fn selector(&mut self) -> Result<Selector, ParseError> {
        let name = self.identifier("a column name or '*'")?;
        let selector = if self.eat_symbol("(") {
            let function = name;
            if function == "count" && self.eat_symbol("*") {
                return Err(ParseError::Unsupported(
                    "COUNT(*) is not supported by this endpoint".into(),
                ));
            }
            let column = self.identifier("a column name")?;
            self.expect_symbol(")")?;
            match function.as_str() {
                "writetime" => Selector::WriteTime(column),
                "ttl" => Selector::Ttl(column),
                other => {
                    return Err(ParseError::Unsupported(format!(
                        "function {other}() is not supported by this endpoint (only WRITETIME \
                         and TTL are)"
                    )));
                }
            }
        } else {
            Selector::Column(name)
        };
        if self.peek_word() == Some("as") {
            return Err(ParseError::Unsupported(
                "selector aliases (AS) are not supported by this endpoint".into(),
            ));
        }
        Ok(selector)
    }

    fn relations(&mut self) -> Result<Vec<Relation>, ParseError> {
        let mut relations = vec![self.relation()?];
        while self.eat_word("and") {
            relations.push(self.relation()?);
        }
        Ok(relations)
    }

    fn relation(&mut self) -> Result<Relation, ParseError> {
        if self.peek_word() == Some("token") {
            return Err(ParseError::Unsupported(
                "TOKEN() relations are not supported by this endpoint".into(),
            ));
        }
        if matches!(
            self.peek(),
            Some(Token {
                kind: Kind::Symbol("("),
                ..
            })
        ) {
            return Err(ParseError::Unsupported(
                "multi-column relations are not supported by this endpoint".into(),
            ));
        }
        let column = self.identifier("a column name")?;
        let operator = match self.next().map(|token| token.kind) {
            Some(Kind::Symbol("=")) => Operator::Eq,
            Some(Kind::Symbol("<")) => Operator::Lt,
            Some(Kind::Symbol("<=")) => Operator::Le,
            Some(Kind::Symbol(">")) => Operator::Gt,
            Some(Kind::Symbol(">=")) => Operator::Ge,
            Some(Kind::Word(word)) if word == "in" => Operator::In,
            Some(Kind::Word(word)) if word == "contains" || word == "like" => {
                return Err(ParseError::Unsupported(format!(
                    "{} relations are not supported by this endpoint",
                    word.to_ascii_uppercase()
                )));
            }
            Some(Kind::Symbol("!=")) => {
                return Err(ParseError::Unsupported(
                    "!= relations are not supported by this endpoint".into(),
                ));
            }
            _ => {
                self.position -= 1;
                return Err(self.expected("a relation operator"));
            }
        };
        let value = if operator == Operator::In && self.eat_symbol("(") {
            let mut items = Vec::new();
            if !self.eat_symbol(")") {
                items.push(self.term()?);
                while self.eat_symbol(",") {
                    items.push(self.term()?);
                }
                self.expect_symbol(")")?;
            }
            Term::List(items)
        } else {
            self.term()?
        };
        Ok(Relation {
            column,
            operator,
            value,
        })
    }

    fn term(&mut self) -> Result<Term, ParseError> {
        let Some(token) = self.next() else {
            return Err(self.end_of_input("a value"));
        };
        match token.kind {
            Kind::Bind => {
                let index = self.binds;
                self.binds += 1;
                Ok(Term::Bind(index))
            }
            Kind::Text(text) => Ok(Term::Text(text)),
            Kind::Hex(bytes) => Ok(Term::Blob(bytes)),
            Kind::Number(number) => number.parse().map(Term::Integer).map_err(|_| {
                ParseError::Unsupported(format!(
                    "line {}:{} the number {number} is not an integer this endpoint can use",
                    token.line, token.column
                ))
            }),
            Kind::Word(word) if word == "true" || word == "false" => {
                Ok(Term::Boolean(word == "true"))
            }
            Kind::Word(word) if word == "null" => Err(ParseError::Unsupported(
                "NULL literals are not supported by this endpoint".into(),
            )),
            Kind::Symbol(":") => Err(ParseError::Unsupported(
                "named bind markers (:name) are not supported by this endpoint; use ?".into(),
            )),
            _ => {
                self.position -= 1;
                Err(self.unexpected(&token, "a value"))
            }
        }
    }

    // ----- INSERT and DELETE ---------------------------------------------------------

    fn insert(&mut self) -> Result<Insert, ParseError> {
        self.expect_word("into")?;
        let table = self.table_name()?;
        if self.peek_word() == Some("json") {
            return Err(ParseError::Unsupported(
                "INSERT JSON is not supported by this endpoint".into(),
            ));
        }
        self.expect_symbol("(")?;
        let mut columns = vec![self.identifier("a column name")?];
        while self.eat_symbol(",") {
            columns.push(self.identifier("a column name")?);
        }
        self.expect_symbol(")")?;
        self.expect_word("values")?;
        self.expect_symbol("(")?;
        let mut values = vec![self.term()?];
        while self.eat_symbol(",") {
            values.push(self.term()?);
        }
        self.expect_symbol(")")?;
        self.reject_condition()?;
        let (mut ttl, mut timestamp) = (None, None);
        if self.eat_word("using") {
            loop {
                if self.eat_word("ttl") {
                    if ttl.is_some() {
                        return Err(ParseError::Syntax("TTL is given twice".into()));
                    }
                    ttl = Some(self.term()?);
                } else if self.eat_word("timestamp") {
                    if timestamp.is_some() {
                        return Err(ParseError::Syntax("TIMESTAMP is given twice".into()));
                    }
                    timestamp = Some(self.term()?);
                } else {
                    return Err(self.expected("TTL or TIMESTAMP"));
                }
                if !self.eat_word("and") {
                    break;
                }
            }
        }
        self.reject_condition()?;
        Ok(Insert {
            table,
            columns,
            values,
            ttl,
            timestamp,
        })
    }

    fn reject_condition(&mut self) -> Result<(), ParseError> {
        if self.peek_word() == Some("if") {
            Err(ParseError::Unsupported(
                "conditional statements (IF ..., lightweight transactions) are not supported \
                 by this endpoint"
                    .into(),
            ))
        } else {
            Ok(())
        }
    }

    fn delete(&mut self) -> Result<Delete, ParseError> {
        if self.peek_word() != Some("from") {
            return Err(ParseError::Unsupported(
                "DELETE of single columns is not supported by this endpoint: delete whole \
                 rows (DELETE FROM ... WHERE lock_id = ? AND row_kind = ? AND column_name = ?)"
                    .into(),
            ));
        }
        self.expect_word("from")?;
        let table = self.table_name()?;
        let timestamp = if self.eat_word("using") {
            self.expect_word("timestamp")?;
            Some(self.term()?)
        } else {
            None
        };
        self.expect_word("where")?;
        let relations = self.relations()?;
        self.reject_condition()?;
        Ok(Delete {
            table,
            timestamp,
            relations,
        })
    }

    // ----- DDL -----------------------------------------------------------------------

    fn create(&mut self) -> Result<Statement, ParseError> {
        if self.eat_word("keyspace") || self.eat_word("schema") {
            let if_not_exists = self.if_not_exists()?;
            let name = self.identifier("a keyspace name")?;
            self.expect_word("with")?;
            let properties = self.properties()?;
            return Ok(Statement::CreateKeyspace(CreateKeyspace {
                name,
                if_not_exists,
                properties,
            }));
        }
        if self.eat_word("table") || self.eat_word("columnfamily") {
            return self.create_table().map(Statement::CreateTable);
        }
        match self.peek_word() {
            Some(other) => Err(ParseError::Unsupported(format!(
                "CREATE {} is not supported by this endpoint (only KEYSPACE and TABLE are)",
                other.to_ascii_uppercase()
            ))),
            None => Err(self.expected("KEYSPACE or TABLE")),
        }
    }

    fn drop(&mut self) -> Result<Statement, ParseError> {
        if self.eat_word("keyspace") || self.eat_word("schema") {
            let if_exists = self.if_exists()?;
            let name = self.identifier("a keyspace name")?;
            return Ok(Statement::DropKeyspace { name, if_exists });
        }
        if self.eat_word("table") || self.eat_word("columnfamily") {
            let if_exists = self.if_exists()?;
            let table = self.table_name()?;
            return Ok(Statement::DropTable { table, if_exists });
        }
        match self.peek_word() {
            Some(other) => Err(ParseError::Unsupported(format!(
                "DROP {} is not supported by this endpoint (only KEYSPACE and TABLE are)",
                other.to_ascii_uppercase()
            ))),
            None => Err(self.expected("KEYSPACE or TABLE")),
        }
    }

    fn create_table(&mut self) -> Result<CreateTable, ParseError> {
        let if_not_exists = self.if_not_exists()?;
        let table = self.table_name()?;
        self.expect_symbol("(")?;
        let mut columns = Vec::new();
        let mut primary_key: Option<(Vec<String>, Vec<String>)> = None;
        loop {
            if self.eat_word("primary") {
                self.expect_word("key")?;
                if primary_key.is_some() {
                    return Err(ParseError::Syntax("the PRIMARY KEY is given twice".into()));
                }
                primary_key = Some(self.primary_key()?);
            } else {
                let name = self.identifier("a column definition")?;
                let ty = self.column_type()?;
                if self.eat_word("static") {
                    return Err(ParseError::Unsupported(
                        "static columns are not supported by this endpoint".into(),
                    ));
                }
                if self.eat_word("primary") {
                    self.expect_word("key")?;
                    if primary_key.is_some() {
                        return Err(ParseError::Syntax("the PRIMARY KEY is given twice".into()));
                    }
                    primary_key = Some((vec![name.clone()], Vec::new()));
                }
                columns.push((name, ty));
            }
            if !self.eat_symbol(",") {
                break;
            }
        }
        self.expect_symbol(")")?;
        let Some((partition_key, clustering)) = primary_key else {
            return Err(ParseError::Syntax("a table needs a PRIMARY KEY".into()));
        };
        let mut clustering_order = Vec::new();
        let mut properties = Vec::new();
        if self.eat_word("with") {
            loop {
                if self.eat_word("clustering") {
                    self.expect_word("order")?;
                    self.expect_word("by")?;
                    self.expect_symbol("(")?;
                    loop {
                        let column = self.identifier("a clustering column")?;
                        let order = if self.eat_word("desc") {
                            Order::Desc
                        } else {
                            self.expect_word("asc")?;
                            Order::Asc
                        };
                        clustering_order.push((column, order));
                        if !self.eat_symbol(",") {
                            break;
                        }
                    }
                    self.expect_symbol(")")?;
                } else if self.eat_word("compact") {
                    return Err(ParseError::Unsupported(
                        "COMPACT STORAGE is not supported by this endpoint".into(),
                    ));
                } else {
                    properties.push(self.property()?);
                }
                if !self.eat_word("and") {
                    break;
                }
            }
        }
        Ok(CreateTable {
            table,
            if_not_exists,
            columns,
            partition_key,
            clustering,
            clustering_order,
            properties,
        })
    }

    fn primary_key(&mut self) -> Result<(Vec<String>, Vec<String>), ParseError> {
        self.expect_symbol("(")?;
        let partition_key = if self.eat_symbol("(") {
            let mut parts = vec![self.identifier("a partition key column")?];
            while self.eat_symbol(",") {
                parts.push(self.identifier("a partition key column")?);
            }
            self.expect_symbol(")")?;
            parts
        } else {
            vec![self.identifier("a partition key column")?]
        };
        let mut clustering = Vec::new();
        while self.eat_symbol(",") {
            clustering.push(self.identifier("a clustering column")?);
        }
        self.expect_symbol(")")?;
        Ok((partition_key, clustering))
    }

    /// A type, rendered back as lowercase text without spaces (`text`, `map<text,blob>`).
    fn column_type(&mut self) -> Result<String, ParseError> {
        self.nested_type(1)
    }

    /// A type `depth` levels deep (1 for a column's own type).
    fn nested_type(&mut self, depth: usize) -> Result<String, ParseError> {
        if depth > MAX_TYPE_DEPTH {
            return Err(ParseError::Unsupported(format!(
                "types nested more than {MAX_TYPE_DEPTH} deep are not supported by this endpoint"
            )));
        }
        let name = match self.next().map(|token| token.kind) {
            Some(Kind::Word(word)) => word,
            _ => {
                self.position -= 1;
                return Err(self.expected("a column type"));
            }
        };
        if !self.eat_symbol("<") {
            return Ok(name);
        }
        let mut parts = vec![self.nested_type(depth + 1)?];
        while self.eat_symbol(",") {
            parts.push(self.nested_type(depth + 1)?);
        }
        self.expect_symbol(">")?;
        Ok(format!("{name}<{}>", parts.join(",")))
    }

    fn properties(&mut self) -> Result<Vec<(String, Property)>, ParseError> {
        let mut properties = vec![self.property()?];
        while self.eat_word("and") {
            properties.push(self.property()?);
        }
        Ok(properties)
    }

    fn property(&mut self) -> Result<(String, Property), ParseError> {
        let name = self.identifier("a property name")?;
        self.expect_symbol("=")?;
        if self.eat_symbol("{") {
            let mut entries = Vec::new();
            if !self.eat_symbol("}") {
                loop {
                    let key = self.constant()?;
                    self.expect_symbol(":")?;
                    let value = self.constant()?;
                    entries.push((key, value));
                    if !self.eat_symbol(",") {
                        break;
                    }
                }
                self.expect_symbol("}")?;
            }
            Ok((name, Property::Map(entries)))
        } else {
            Ok((name, Property::Constant(self.constant()?)))
        }
    }

    fn constant(&mut self) -> Result<Constant, ParseError> {
        match self.next().map(|token| token.kind) {
            Some(Kind::Text(text)) => Ok(Constant::Text(text)),
            Some(Kind::Number(number)) => Ok(Constant::Number(number)),
            Some(Kind::Word(word)) if word == "true" || word == "false" => {
                Ok(Constant::Boolean(word == "true"))
            }
            _ => {
                self.position -= 1;
                Err(self.expected("a constant"))
            }
        }
    }
}

/// Words that cannot be unquoted identifiers here.
fn is_reserved(word: &str) -> bool {
    matches!(
        word,
        "select"
            | "from"
            | "where"
            | "and"
            | "insert"
            | "into"
            | "values"
            | "using"
            | "delete"
            | "limit"
            | "create"
            | "drop"
            | "use"
            | "with"
            | "primary"
            | "order"
            | "by"
            | "allow"
            | "if"
            | "in"
            | "set"
            | "update"
            | "batch"
            | "apply"
            | "begin"
            | "keyspace"
            | "table"
            | "null"
            | "token"
            | "asc"
            | "desc"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Statement, ParseError> {
        super::parse(text).map(|parsed| parsed.statement)
    }

    #[test]
    fn bind_markers_are_counted() {
        let parsed = super::parse("SELECT a FROM t WHERE b = ? AND c IN (?, 'x', ?) LIMIT ?");
        assert_eq!(parsed.map(|parsed| parsed.bind_markers), Ok(4));
    }

    fn bind(index: usize) -> Term {
        Term::Bind(index)
    }

    fn table(keyspace: &str, name: &str) -> TableName {
        TableName {
            keyspace: Some(keyspace.into()),
            name: name.into(),
        }
    }

    fn relation(column: &str, operator: Operator, value: Term) -> Relation {
        Relation {
            column: column.into(),
            operator,
            value,
        }
    }

    #[test]
    fn the_backends_statements_parse_exactly() {
        assert_eq!(
            parse(
                "INSERT INTO locks.lock_cells (lock_id, row_kind, column_name, value) \
                 VALUES (?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?"
            ),
            Ok(Statement::Insert(Insert {
                table: table("locks", "lock_cells"),
                columns: vec![
                    "lock_id".into(),
                    "row_kind".into(),
                    "column_name".into(),
                    "value".into()
                ],
                values: vec![bind(0), bind(1), bind(2), bind(3)],
                ttl: Some(bind(4)),
                timestamp: Some(bind(5)),
            }))
        );
        assert_eq!(
            parse(
                "DELETE FROM locks.lock_cells USING TIMESTAMP ? \
                 WHERE lock_id = ? AND row_kind = ? AND column_name = ?"
            ),
            Ok(Statement::Delete(Delete {
                table: table("locks", "lock_cells"),
                timestamp: Some(bind(0)),
                relations: vec![
                    relation("lock_id", Operator::Eq, bind(1)),
                    relation("row_kind", Operator::Eq, bind(2)),
                    relation("column_name", Operator::Eq, bind(3)),
                ],
            }))
        );
        assert_eq!(
            parse(
                "SELECT column_name, value, WRITETIME(value) FROM locks.lock_cells \
                 WHERE lock_id = ? AND row_kind = ? AND column_name >= ? LIMIT ?"
            ),
            Ok(Statement::Select(Select {
                selectors: Some(vec![
                    Selector::Column("column_name".into()),
                    Selector::Column("value".into()),
                    Selector::WriteTime("value".into()),
                ]),
                table: table("locks", "lock_cells"),
                relations: vec![
                    relation("lock_id", Operator::Eq, bind(0)),
                    relation("row_kind", Operator::Eq, bind(1)),
                    relation("column_name", Operator::Ge, bind(2)),
                ],
                limit: Some(bind(3)),
            }))
        );
    }

    #[test]
    fn the_backends_ddl_parses_with_every_option() {
        let Ok(Statement::CreateKeyspace(keyspace)) = parse(
            "CREATE KEYSPACE IF NOT EXISTS locks WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 3}",
        ) else {
            panic!("not a keyspace");
        };
        assert!(keyspace.if_not_exists);
        assert_eq!(keyspace.name, "locks");
        assert_eq!(
            keyspace.properties,
            [(
                "replication".to_owned(),
                Property::Map(vec![
                    (
                        Constant::Text("class".into()),
                        Constant::Text("SimpleStrategy".into())
                    ),
                    (
                        Constant::Text("replication_factor".into()),
                        Constant::Number("3".into())
                    ),
                ])
            )]
        );
        let Ok(Statement::CreateTable(create)) = parse(
            "CREATE TABLE IF NOT EXISTS locks.cells \
             (lock_id text, row_kind text, column_name text, value blob, \
             PRIMARY KEY ((lock_id, row_kind), column_name)) \
             WITH CLUSTERING ORDER BY (column_name ASC) AND gc_grace_seconds = 3600 \
             AND compaction = {'class': 'LeveledCompactionStrategy', \
             'tombstone_compaction_interval': '3600', 'unchecked_tombstone_compaction': 'true'}",
        ) else {
            panic!("not a table");
        };
        assert_eq!(create.table, table("locks", "cells"));
        assert_eq!(create.columns.len(), 4);
        assert_eq!(create.columns[3], ("value".to_owned(), "blob".to_owned()));
        assert_eq!(create.partition_key, ["lock_id", "row_kind"]);
        assert_eq!(create.clustering, ["column_name"]);
        assert_eq!(
            create.clustering_order,
            [("column_name".to_owned(), Order::Asc)]
        );
        assert_eq!(create.properties.len(), 2);
        assert_eq!(
            create.properties[0],
            (
                "gc_grace_seconds".to_owned(),
                Property::Constant(Constant::Number("3600".into()))
            )
        );
    }

    #[test]
    fn driver_metadata_queries_parse() {
        let Ok(Statement::Select(local)) = parse(
            "SELECT host_id, rpc_address, data_center, rack, tokens, cluster_name \
             FROM system.local WHERE key='local'",
        ) else {
            panic!("not a select");
        };
        assert_eq!(
            local.relations,
            [relation("key", Operator::Eq, Term::Text("local".into()))]
        );
        let Ok(Statement::Select(columns)) = parse(
            "SELECT keyspace_name, table_name, column_name, kind, position, type \
             FROM system_schema.columns where keyspace_name in ?",
        ) else {
            panic!("not a select");
        };
        assert_eq!(
            columns.relations,
            [relation("keyspace_name", Operator::In, bind(0))]
        );
        assert_eq!(parse("USE \"Locks\";"), Ok(Statement::Use("Locks".into())));
        assert!(matches!(
            parse("select * from system.peers -- comment\n"),
            Ok(Statement::Select(Select {
                selectors: None,
                ..
            }))
        ));
    }

    #[test]
    fn literals_parse() {
        let Ok(Statement::Insert(insert)) = parse(
            "insert into t (a, b, c, d) values ('it''s', 0xCAFE, -12, true) using timestamp 5",
        ) else {
            panic!("not an insert");
        };
        assert_eq!(
            insert.values,
            [
                Term::Text("it's".into()),
                Term::Blob(vec![0xca, 0xfe]),
                Term::Integer(-12),
                Term::Boolean(true)
            ]
        );
        assert_eq!(insert.timestamp, Some(Term::Integer(5)));
        assert_eq!(insert.table.keyspace, None);
    }

    fn unsupported(text: &str) -> String {
        match parse(text) {
            Err(ParseError::Unsupported(message)) => message,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn syntax(text: &str) -> String {
        match parse(text) {
            Err(ParseError::Syntax(message)) => message,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn features_outside_the_grammar_are_named() {
        assert!(unsupported("INSERT INTO t (a) VALUES (?) IF NOT EXISTS").contains("IF"));
        assert!(
            unsupported("INSERT INTO t (a) VALUES (?) USING TTL 1 IF NOT EXISTS").contains("IF")
        );
        assert!(unsupported("DELETE FROM t WHERE a = ? IF EXISTS").contains("IF"));
        assert!(unsupported("SELECT * FROM t WHERE a = ? ORDER BY b DESC").contains("ORDER BY"));
        assert!(unsupported("SELECT * FROM t WHERE a = ? ALLOW FILTERING").contains("ALLOW"));
        assert!(unsupported("SELECT * FROM t LIMIT 1 ALLOW FILTERING").contains("ALLOW"));
        assert!(unsupported("SELECT DISTINCT a FROM t").contains("DISTINCT"));
        assert!(unsupported("SELECT count(*) FROM t").contains("COUNT"));
        assert!(unsupported("SELECT now(a) FROM t").contains("now"));
        assert!(unsupported("SELECT a AS b FROM t").contains("AS"));
        assert!(unsupported("SELECT * FROM t WHERE token(a) > 0").contains("TOKEN"));
        assert!(unsupported("SELECT * FROM t WHERE a CONTAINS 'x'").contains("CONTAINS"));
        assert!(unsupported("UPDATE t SET a = 1 WHERE b = 2").contains("UPDATE"));
        assert!(
            unsupported("BEGIN BATCH INSERT INTO t (a) VALUES (1) APPLY BATCH").contains("BEGIN")
        );
        assert!(unsupported("TRUNCATE t").contains("TRUNCATE"));
        assert!(unsupported("CREATE INDEX i ON t (a)").contains("INDEX"));
        assert!(unsupported("DELETE value FROM t WHERE a = 1").contains("single columns"));
        assert!(unsupported("SELECT * FROM t WHERE a = :name").contains("named"));
        assert!(
            unsupported("CREATE TABLE t (a text PRIMARY KEY) WITH COMPACT STORAGE")
                .contains("COMPACT")
        );
    }

    #[test]
    fn garbage_is_a_syntax_error_with_a_position() {
        assert!(syntax("garbage here").contains("line 1:1"));
        assert!(syntax("SELECT a FROM").contains("end of statement"));
        assert!(syntax("SELECT a FROM t WHERE").contains("end of statement"));
        assert!(syntax("SELECT a FROM t extra").contains("'extra'"));
        assert!(syntax("SELECT 'unterminated FROM t").contains("unterminated"));
        assert!(syntax("INSERT INTO t (a) VALUES (0xabc)").contains("hex"));
        assert!(syntax("SELECT a FROM t WHERE a ~ 1").contains("line 1:25"));
        assert!(syntax("INSERT INTO t (a) VALUES (1) USING TTL 1 AND TTL 2").contains("twice"));
        assert!(syntax("").contains("statement"));
        assert!(syntax("SELECT a\nFROM t WHERE a = = 1").contains("line 2:"));
        assert!(syntax("CREATE TABLE t (a text)").contains("PRIMARY KEY"));
    }

    #[test]
    fn deeply_nested_types_are_refused_not_a_stack_overflow() {
        // Regression: `frozen<` nested 10,000 times used to overflow the stack and abort the
        // process.
        // Run on a small stack, as a Tokio worker's, so that a recursion bound too loose
        // for it fails here too.
        let deep = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let nested = |depth: usize| {
                    format!(
                        "CREATE TABLE t (a text, b {}text{}, PRIMARY KEY (a))",
                        "frozen<".repeat(depth),
                        ">".repeat(depth)
                    )
                };
                (
                    parse(&nested(10_000)),
                    parse(&nested(MAX_TYPE_DEPTH - 1)),
                    parse(&nested(MAX_TYPE_DEPTH)),
                )
            })
            .unwrap()
            .join()
            .unwrap();
        match deep.0 {
            Err(ParseError::Unsupported(message)) => assert!(message.contains("nested")),
            other => panic!("{other:?}"),
        }
        assert!(deep.1.is_ok(), "{:?}", deep.1);
        assert!(matches!(deep.2, Err(ParseError::Unsupported(_))));
    }

    /// A statement of about `size` bytes on one line, with a token every two bytes.
    fn long_statement(size: usize) -> String {
        let mut text = String::from("SELECT a FROM t WHERE a IN (1");
        while text.len() < size {
            text.push_str(",1");
        }
        text.push(')');
        text
    }

    #[test]
    fn tokenising_is_linear_in_the_length_of_a_line() {
        // Regression: the column of every token used to be counted from the start of its
        // line, so a 1 MB line took about 17 s. 4 MB now takes well under a second (even in
        // a debug build); quadratic, it would take minutes.
        let text = long_statement(4 << 20);
        let started = std::time::Instant::now();
        let parsed = parse(&text);
        let elapsed = started.elapsed();
        assert!(parsed.is_ok(), "{parsed:?}");
        assert!(elapsed < std::time::Duration::from_secs(10), "{elapsed:?}");
        // Columns are still counted in characters.
        assert!(syntax("SELECT 'é' ~").contains("line 1:12"));
        assert!(syntax("SELECT a\n  'é' ~").contains("line 2:7"));
    }

    /// `cargo test -p cql-endpoint --release --lib -- --ignored parse_time --nocapture`:
    /// the time to parse a 1 MB statement.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn parse_time_of_a_one_megabyte_statement() {
        let text = long_statement(1 << 20);
        let started = std::time::Instant::now();
        let parsed = parse(&text);
        println!(
            "parsed {} bytes in {:?}: {}",
            text.len(),
            started.elapsed(),
            parsed.is_ok()
        );
    }

    #[test]
    fn arbitrary_text_never_panics() {
        let samples = [
            "SELECT ((((",
            "'",
            "\"",
            "/*",
            "0x",
            "-",
            "?",
            "SELECT * FROM a.b.c",
            "é",
            "\u{0}",
            "CREATE TABLE t (a map<text, PRIMARY KEY (a))",
            "INSERT INTO t () VALUES ()",
        ];
        for sample in samples {
            let _ = parse(sample);
        }
        // Every prefix of a long statement.
        let text = "CREATE TABLE IF NOT EXISTS ks.t (a text, b map<text,blob>, PRIMARY KEY ((a), b)) \
                    WITH CLUSTERING ORDER BY (b DESC) AND x = {'k': 1, 'j': true}";
        for end in 0..text.len() {
            let _ = parse(&text[..end]);
        }
    }
}
