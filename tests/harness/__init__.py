"""Test harness: the database servers the tests run against and helpers around them."""
