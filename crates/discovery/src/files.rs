//! A YAML file of server definitions, read as discovery candidates.
