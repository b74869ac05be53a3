//! [`Value`]s as PostgreSQL parameters, and result columns as [`Value`]s.
//!
//! The schema uses four kinds only (BIGINT, TEXT, BYTEA, NULL; booleans are 0/1 BIGINTs), so
//! the conversion is by the column's declared type, and anything else is refused by name
//! rather than guessed at.

use std::error::Error;

use tokio_postgres::types::private::BytesMut;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use zodex_sql::{Row, SqlError, Value};

/// One parameter. PostgreSQL infers each parameter's type from the statement; an integer is
/// narrowed to that type's width (with a range check), and NULL fits any type.
#[derive(Debug)]
pub(crate) struct Param(pub(crate) Value);

type BoxError = Box<dyn Error + Sync + Send>;

fn narrow<T: TryFrom<i64>>(n: i64, ty: &Type) -> Result<T, BoxError> {
    T::try_from(n).map_err(|_| format!("{n} does not fit a {ty} parameter").into())
}

impl ToSql for Param {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        match (&self.0, ty) {
            (Value::Null, _) => return Ok(IsNull::Yes),
            (Value::Int(n), &Type::INT8) => n.to_sql(ty, out)?,
            (Value::Int(n), &Type::INT4) => narrow::<i32>(*n, ty)?.to_sql(ty, out)?,
            (Value::Int(n), &Type::INT2) => narrow::<i16>(*n, ty)?.to_sql(ty, out)?,
            (Value::Int(n @ (0 | 1)), &Type::BOOL) => (*n == 1).to_sql(ty, out)?,
            (Value::Text(s), &Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::NAME) => {
                s.as_str().to_sql(ty, out)?
            }
            (Value::Bytes(b), &Type::BYTEA) => b.as_slice().to_sql(ty, out)?,
            (value, ty) => {
                return Err(
                    format!("a {} cannot be bound to a {ty} parameter", kind(value)).into(),
                );
            }
        };
        Ok(IsNull::No)
    }

    /// Any type: NULL binds to all of them, and [`to_sql`](Self::to_sql) refuses the pairs
    /// that do not fit (the value is only known there).
    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "NULL",
        Value::Int(_) => "integer",
        Value::Text(_) => "text",
        Value::Bytes(_) => "byte string",
    }
}

/// One result row, each column read by its type.
pub(crate) fn read_row(row: &tokio_postgres::Row) -> Result<Row, SqlError> {
    let mut values = Vec::with_capacity(row.len());
    for (index, column) in row.columns().iter().enumerate() {
        let ty = column.type_();
        let fail = |e: tokio_postgres::Error| SqlError::Column {
            column: index,
            detail: format!("{} ({ty}): {e}", column.name()),
        };
        let value = match *ty {
            Type::INT8 => row
                .try_get::<_, Option<i64>>(index)
                .map_err(fail)?
                .map(Value::Int),
            Type::INT4 => row
                .try_get::<_, Option<i32>>(index)
                .map_err(fail)?
                .map(|n| Value::Int(n.into())),
            Type::INT2 => row
                .try_get::<_, Option<i16>>(index)
                .map_err(fail)?
                .map(|n| Value::Int(n.into())),
            Type::BOOL => row
                .try_get::<_, Option<bool>>(index)
                .map_err(fail)?
                .map(|b| Value::Int(b.into())),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => row
                .try_get::<_, Option<String>>(index)
                .map_err(fail)?
                .map(Value::Text),
            Type::BYTEA => row
                .try_get::<_, Option<Vec<u8>>>(index)
                .map_err(fail)?
                .map(Value::Bytes),
            _ => {
                return Err(SqlError::Column {
                    column: index,
                    detail: format!(
                        "{} has PostgreSQL type {ty}, which the store does not read (cast it to \
                         BIGINT, TEXT or BYTEA)",
                        column.name()
                    ),
                });
            }
        };
        values.push(value.unwrap_or(Value::Null));
    }
    Ok(Row::new(values))
}
