"""Genomics tasks: promoter and chromatin-profile data sets, and fine-tuning."""
