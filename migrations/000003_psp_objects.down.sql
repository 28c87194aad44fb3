DROP TABLE IF EXISTS psp_objects;
