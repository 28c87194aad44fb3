SET lock_timeout = '5s';

REVOKE ALL ON river_job, river_leader, river_queue FROM aegis_webhook_api;
REVOKE USAGE ON SEQUENCE river_job_id_seq FROM aegis_webhook_api;
