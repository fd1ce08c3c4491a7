package sqs_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pipesproject/pipes/internal/s3payload"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/source/sqs"
)

// No server: New makes no call.
func TestPayloadSettingsThatDoNotGoTogetherAreRefused(t *testing.T) {
	awsCfg := &aws.Config{Region: sqstest.Region, Credentials: sqstest.Credentials}
	store, err := s3payload.NewStore(t.Context(), s3payload.Config{AWSConfig: awsCfg})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		payloads *sqs.Payloads
		want     string // "" when accepted
	}{
		{"pointers need a store", &sqs.Payloads{Pointers: true}, "unwrapping S3 pointers needs an S3 store"},
		{"deletes need pointers", &sqs.Payloads{Events: true, Delete: true}, "deleting S3 payloads needs the unwrapping of S3 pointers"},
		{"a negative concurrency", &sqs.Payloads{Pointers: true, Store: store, Concurrency: -1}, "S3 payload concurrency -1 is negative"},
		{"events need no store", &sqs.Payloads{Events: true}, ""},
		{"pointers with a store and deletes", &sqs.Payloads{Pointers: true, Store: store, Delete: true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sqs.New(t.Context(), sqs.Config{QueueName: "q", AWSConfig: awsCfg, Payloads: tt.payloads})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New = %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
