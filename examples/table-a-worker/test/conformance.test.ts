// statusq's conformance suite against this project's own database and drivers: SQLite by default, and the
// MariaDB/MySQL server STATUSQ_MYSQL_URL names when it is set (a database per test, created and dropped there).
import { runConformance } from '@statusq/conformance';
import { mysqlConformance } from '@statusq/adapter-mysql/testing';
import { sqliteConformance } from '@statusq/adapter-sqlite/testing';

runConformance(process.env.STATUSQ_MYSQL_URL ? mysqlConformance : sqliteConformance);
