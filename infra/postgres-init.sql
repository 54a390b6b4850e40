-- The Prefect server's database, beside MLflow's (created by POSTGRES_DB).
CREATE DATABASE prefect;
