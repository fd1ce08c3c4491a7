package sqs

import "github.com/pipesproject/pipes/internal/awsclient"

// classify marks a failed SQS call's error with awsclient.SQS:
// pipe.Throttled when SQS asked to slow down, pipe.Permanent when retrying
// cannot help (access denied, no such queue, invalid request, missing
// credentials), the error as it is otherwise.
var classify = awsclient.SQS.Classify
