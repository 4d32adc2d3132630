"""AWS's doors shared by every engine: clients built from the settings, botocore's errors
classified once (:mod:`.io`), S3 objects, DynamoDB Streams and table exports, and the audit
hook that keeps secrets out of the logs."""
