//! Opening the state where the configuration puts it: SQLite's file (the embedded default) or
//! a PostgreSQL database several publishers share.

use zodex_config::StoreLocation;
use zodex_engine::store::{SqlError, Store, StoreError};
use zodex_store_pg::{PgSettings, PgStore};

/// Opens the store at `location` and brings its schema up to date. A PostgreSQL store that
/// cannot be reached is an error naming it (the pool itself reconnects later, so a database
/// that goes away while the publisher runs needs no restart).
pub fn open_store(location: &StoreLocation) -> Result<Store, StoreError> {
    match location {
        StoreLocation::Sqlite(path) => Store::open(path),
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
            Store::on(Box::new(pool.backend()))
        }
    }
}
