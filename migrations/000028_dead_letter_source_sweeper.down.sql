UPDATE dead_letters SET source = 'consumer' WHERE source = 'sweeper';
ALTER TABLE dead_letters DROP CONSTRAINT dead_letters_source_check,
    ADD CONSTRAINT dead_letters_source_check CHECK (source IN ('ingest', 'relay', 'consumer'));
