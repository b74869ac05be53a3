//! Values crossing between the store and a database, and rows of them.

use crate::SqlError;

/// One value as the store's schema holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
}

/// A Rust value bound to a statement parameter.
pub trait ToSql {
    fn to_value(&self) -> Value;
}

/// A Rust value read from a column.
pub trait FromSql: Sized {
    fn from_value(value: Value) -> Result<Self, ValueError>;
}

/// A column's value is not of the kind a reader asked for; [`Row::get`] names the column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("expected {expected}, found {found}")]
    Kind {
        expected: &'static str,
        found: &'static str,
    },
    #[error("expected a count, found {0}")]
    Negative(i64),
    #[error("{0} does not fit 32 bits")]
    TooWide(i64),
}

/// One result row: its columns in the statement's order, read by position.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    values: Vec<Value>,
}

impl Row {
    pub fn new(values: Vec<Value>) -> Self {
        Self { values }
    }

    /// Column `index` as a `T`; a missing column or a value of another kind is an error naming
    /// the column.
    pub fn get<T: FromSql>(&self, index: usize) -> Result<T, SqlError> {
        let value = self.values.get(index).cloned().ok_or(SqlError::Column {
            column: index,
            detail: "no such column".into(),
        })?;
        T::from_value(value).map_err(|e| SqlError::Column {
            column: index,
            detail: e.to_string(),
        })
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl ToSql for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}

impl<T: ToSql + ?Sized> ToSql for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}

impl<T: ToSql> ToSql for Option<T> {
    fn to_value(&self) -> Value {
        self.as_ref().map_or(Value::Null, ToSql::to_value)
    }
}

macro_rules! int_to_sql {
    ($($t:ty),*) => {$(
        impl ToSql for $t {
            fn to_value(&self) -> Value {
                Value::Int(i64::from(*self))
            }
        }
    )*};
}
int_to_sql!(i64, i32, u32, u16, u8, bool);

impl ToSql for u64 {
    /// Saturates: the schema's integers are signed 64-bit in both databases.
    fn to_value(&self) -> Value {
        Value::Int(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl ToSql for usize {
    fn to_value(&self) -> Value {
        Value::Int(i64::try_from(*self).unwrap_or(i64::MAX))
    }
}

impl ToSql for str {
    fn to_value(&self) -> Value {
        Value::Text(self.to_owned())
    }
}

impl ToSql for String {
    fn to_value(&self) -> Value {
        Value::Text(self.clone())
    }
}

impl ToSql for std::borrow::Cow<'_, str> {
    fn to_value(&self) -> Value {
        Value::Text(self.to_string())
    }
}

impl ToSql for [u8] {
    fn to_value(&self) -> Value {
        Value::Bytes(self.to_vec())
    }
}

impl ToSql for Vec<u8> {
    fn to_value(&self) -> Value {
        Value::Bytes(self.clone())
    }
}

impl<const N: usize> ToSql for [u8; N] {
    fn to_value(&self) -> Value {
        Value::Bytes(self.to_vec())
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "NULL",
        Value::Int(_) => "an integer",
        Value::Text(_) => "text",
        Value::Bytes(_) => "bytes",
    }
}

impl FromSql for Value {
    fn from_value(value: Value) -> Result<Self, ValueError> {
        Ok(value)
    }
}

impl FromSql for i64 {
    fn from_value(value: Value) -> Result<Self, ValueError> {
        match value {
            Value::Int(n) => Ok(n),
            other => Err(ValueError::Kind {
                expected: "an integer",
                found: kind(&other),
            }),
        }
    }
}

impl FromSql for u64 {
    fn from_value(value: Value) -> Result<Self, ValueError> {
        let n = i64::from_value(value)?;
        u64::try_from(n).map_err(|_| ValueError::Negative(n))
    }
}

impl FromSql for u32 {
    fn from_value(value: Value) -> Result<Self, ValueError> {
        let n = i64::from_value(value)?;
        u32::try_from(n).map_err(|_| ValueError::TooWide(n))
    }
}

impl FromSql for bool {
    fn from_value(value: Value) -> Result<Self, ValueError> {
        Ok(i64::from_value(value)? != 0)
    }
}

impl FromSql for String {
    fn from_value(value: Value) -> Result<Self, ValueError> {
        match value {
            Value::Text(text) => Ok(text),
            other => Err(ValueError::Kind {
                expected: "text",
                found: kind(&other),
            }),
        }
    }
}

impl FromSql for Vec<u8> {
    fn from_value(value: Value) -> Result<Self, ValueError> {
        match value {
            Value::Bytes(bytes) => Ok(bytes),
            other => Err(ValueError::Kind {
                expected: "bytes",
                found: kind(&other),
            }),
        }
    }
}

impl<T: FromSql> FromSql for Option<T> {
    fn from_value(value: Value) -> Result<Self, ValueError> {
        match value {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_reads_each_kind_and_names_a_wrong_one() {
        let row = Row::new(vec![
            Value::Int(1),
            Value::Text("x".into()),
            Value::Null,
            Value::Bytes(vec![7]),
        ]);
        assert!(row.get::<bool>(0).unwrap());
        assert_eq!(row.get::<String>(1).unwrap(), "x");
        assert_eq!(row.get::<Option<i64>>(2).unwrap(), None);
        assert_eq!(row.get::<Vec<u8>>(3).unwrap(), vec![7]);
        let err = row.get::<i64>(1).unwrap_err().to_string();
        assert!(
            err.contains("column 1") && err.contains("found text"),
            "{err}"
        );
        assert!(row.get::<i64>(9).is_err());
    }

    #[test]
    fn parameters_become_values() {
        assert_eq!(true.to_value(), Value::Int(1));
        assert_eq!(None::<i64>.to_value(), Value::Null);
        assert_eq!("a".to_value(), Value::Text("a".into()));
        assert_eq!(u64::MAX.to_value(), Value::Int(i64::MAX));
    }
}
