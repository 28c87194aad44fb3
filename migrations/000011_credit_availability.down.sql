SET lock_timeout = '5s';

DROP TABLE IF EXISTS credit_availability;
