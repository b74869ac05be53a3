//! Opening the state where the configuration puts it: SQLite's file (the embedded default) or
//! a PostgreSQL database several publishers share.

use zodex_config::StoreLocation;
use zodex_engine::store::{SqlError, Store, StoreError};
use zodex_store_pg::{PgSettings, PgStore};

/// Opens the store at `location` and brings its schema up to date. A PostgreSQL store that
/// cannot be reached is an error naming it (the pool itself reconnects later, so a database
/// that goes away while the publisher runs needs no restart).
pub fn open_store(location: &StoreLocation) -> Result<Store, StoreError> {
    Ok(open_stores(location, 1)?
        .pop()
        .expect("one store was asked for"))
}

/// The stores a serving publisher shares ([`SharedStore`](crate::shared_store::SharedStore)):
/// SQLite's one; on PostgreSQL one per connection of the pool (`[store] pool_size`), so reads
/// run side by side. The first brings the schema up to date.
pub fn open_shared(
    location: &StoreLocation,
) -> Result<crate::shared_store::SharedStore, StoreError> {
    let size = match location {
        StoreLocation::Sqlite(_) => 1,
        StoreLocation::Postgres(pg) => pg.pool_size.max(1),
    };
    Ok(crate::shared_store::SharedStore::of(open_stores(
        location, size,
    )?))
}

/// `count` stores at `location` (SQLite: always one), on one pool.
fn open_stores(location: &StoreLocation, count: usize) -> Result<Vec<Store>, StoreError> {
    match location {
        StoreLocation::Sqlite(path) => Ok(vec![Store::open(path)?]),
        StoreLocation::Postgres(pg) => {
            let password = pg
                .password()
                .map_err(|e| StoreError::Unavailable(SqlError::Other(e.to_string())))?;
            let settings = PgSettings {
                password,
                pool_size: pg.pool_size,
                wait_timeout: pg.wait,
                ..PgSettings::new(pg.url.clone())
            };
            let pool = PgStore::connect(&settings)?;
            (0..count.max(1))
                .map(|_| Store::on(Box::new(pool.backend())))
                .collect()
        }
    }
}
