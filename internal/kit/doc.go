// Package kit holds the helpers that the module's own sources and targets
// share and that sit above package pipe: each package under kit imports pipe
// (for Event, Message or the error classes), and pipe imports none of them.
//
//	awsbatch   the AWS batch targets' kit: limits, entry ids, calls,
//	           per-entry failures and throttling (sqs, sns, eventbridge,
//	           kinesis, firehose)
//	awsclient  AWS SDK configuration, SigV4 signing, error classification
//	batching   entry splitting by count and bytes, payload arrays
//	httpcore   the HTTP client, status classification and secret masking
//	           shared by the http target and enrichment
//	param      target parameters: templates read per batch or per record
//	partial    the partial batch answer (batchItemFailures) parser
//
// The packages directly under internal/ (backoff, jsonvalue, syncbuf, …) sit
// below pipe or beside it and never import it.
package kit
