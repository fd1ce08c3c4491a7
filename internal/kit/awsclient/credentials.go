package awsclient

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"

	"github.com/pipesproject/pipes/pipe"
)

// CredentialsError is the error of a call made when the default AWS
// configuration found no credentials: nothing in the environment or the
// shared files, so the SDK fell back to the EC2 instance role, and that
// failed too. It says what to set. Calls return it marked pipe.Permanent
// (find it with errors.As); Err is the SDK's error.
type CredentialsError struct {
	Err error
}

// Error says what to set, then the SDK's error.
func (e *CredentialsError) Error() string {
	return "no AWS credentials found: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, " +
		"or run with a role (IRSA on EKS, an instance profile on EC2); " +
		"for a local SQS-compatible server any dummy keys work: " + e.Err.Error()
}

// Unwrap returns the SDK's error.
func (e *CredentialsError) Unwrap() error { return e.Err }

// explainMissing wraps a credentials provider that is the default chain's
// last resort (the EC2 instance role): its failures become a Permanent
// *CredentialsError. It delegates everything else, so the SDK still sees
// the cache and the provider beneath.
type explainMissing struct {
	p aws.CredentialsProvider
}

// Retrieve gets the credentials from the wrapped provider.
func (e explainMissing) Retrieve(ctx context.Context) (aws.Credentials, error) {
	creds, err := e.p.Retrieve(ctx)
	if err != nil && ctx.Err() == nil {
		return creds, pipe.Permanent(&CredentialsError{Err: err})
	}
	return creds, err
}

// IsCredentialsProvider lets aws.IsCredentialsProvider see through the
// wrapper (the clients look for their cache there).
func (e explainMissing) IsCredentialsProvider(target aws.CredentialsProvider) bool {
	return aws.IsCredentialsProvider(e.p, target)
}

// explainMissingCredentials makes cfg's credentials explain themselves
// when the default chain found none but the EC2 instance role.
func explainMissingCredentials(cfg *aws.Config) {
	if cfg.Credentials != nil && aws.IsCredentialsProvider(cfg.Credentials, (*ec2rolecreds.Provider)(nil)) {
		cfg.Credentials = explainMissing{p: cfg.Credentials}
	}
}
