package s3payload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
)

// DefaultMaxObjectSize is the largest payload object a Store reads by
// default (64 MiB): a pointer to a larger one fails its message instead of
// filling the runner's memory.
const DefaultMaxObjectSize = 64 << 20

// Config says how a Store reaches S3.
type Config struct {
	// Region overrides the region of the AWS config.
	Region string
	// RegionGuess is the region used when neither Region nor the AWS
	// config gives one (e.g. the region of the queue's URL).
	RegionGuess string
	// Endpoint overrides the S3 endpoint (an S3-compatible server such as
	// fauxqs or MinIO). AWS_ENDPOINT_URL_S3 works too, through the SDK.
	Endpoint string
	// PathStyle addresses buckets in the path (http://host/bucket/key)
	// instead of the host name, as emulators need.
	PathStyle bool
	// MaxObjectSize is the largest object Get reads; 0 means
	// DefaultMaxObjectSize.
	MaxObjectSize int64
	// OnCall, when set, is called once for every HTTP attempt sent to S3.
	OnCall func(operation string)
	// Logger receives the SDK's logs; nil discards them.
	Logger *slog.Logger
	// AWSConfig, when set, is the AWS configuration to build the client
	// from; by default config.LoadDefaultConfig.
	AWSConfig *aws.Config
}

// objectAPI is the part of the S3 client a Store calls.
type objectAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// Store gets, puts and deletes payload objects. Each method blocks for
// one S3 call (SDK retries included), bounded by ctx. It is safe for
// concurrent use.
type Store struct {
	api     objectAPI
	maxSize int64
}

// NewStore builds the S3 client of cfg. It does no network I/O.
func NewStore(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.MaxObjectSize < 0 {
		return nil, fmt.Errorf("configuring S3 payloads: max object size %d is negative", cfg.MaxObjectSize)
	}
	awsCfg, err := awsclient.Load(ctx, cfg.AWSConfig)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration for S3 payloads: %w", err)
	}
	region, ok := awsclient.Region(awsCfg, cfg.Region, cfg.RegionGuess)
	if !ok {
		return nil, errors.New("configuring S3 payloads: no AWS region: set the region, AWS_REGION or a profile's region")
	}
	ov := awsclient.Overrides{Region: region, Endpoint: cfg.Endpoint, OnCall: cfg.OnCall, Logger: cfg.Logger}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions)
		o.UsePathStyle = cfg.PathStyle
	})
	return newStore(client, cfg.MaxObjectSize), nil
}

func newStore(api objectAPI, maxSize int64) *Store {
	if maxSize == 0 {
		maxSize = DefaultMaxObjectSize
	}
	return &Store{api: api, maxSize: maxSize}
}

// ErrNotFound is what Get and Delete report, wrapped, for an object or a
// bucket that does not exist.
var ErrNotFound = errors.New("the S3 object does not exist")

// ErrAccessDenied is what the Store reports, wrapped, when S3 refuses the
// call (HTTP 403).
var ErrAccessDenied = errors.New("access to the S3 object is denied")

// ErrTooLarge is what Get reports, wrapped, for an object above the
// Store's MaxObjectSize.
var ErrTooLarge = errors.New("the S3 object is larger than the payload limit")

// Get reads the object p names, into a string of its own (a message body:
// read once, never copied again). A missing object or bucket is reported
// as ErrNotFound, a refused call as ErrAccessDenied, an object above the
// limit as ErrTooLarge, each wrapped with the object's name.
func (s *Store) Get(ctx context.Context, p Pointer) (string, error) {
	out, err := s.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)})
	if err != nil {
		return "", fmt.Errorf("getting the payload %s: %w", p, classify(err))
	}
	defer out.Body.Close()
	size := aws.ToInt64(out.ContentLength)
	if size > s.maxSize {
		return "", fmt.Errorf("getting the payload %s: %w (%d bytes, limit %d)", p, ErrTooLarge, size, s.maxSize)
	}
	var b strings.Builder
	b.Grow(int(max(size, 0)))
	n, err := io.Copy(&b, io.LimitReader(out.Body, s.maxSize+1))
	if err != nil {
		return "", fmt.Errorf("reading the payload %s: %w", p, err)
	}
	if n > s.maxSize {
		return "", fmt.Errorf("getting the payload %s: %w (more than %d bytes)", p, ErrTooLarge, s.maxSize)
	}
	return b.String(), nil
}

// Put stores body as the object p names.
func (s *Store) Put(ctx context.Context, p Pointer, body []byte) error {
	_, err := s.api.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(p.Bucket), Key: aws.String(p.Key),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		return fmt.Errorf("storing the payload %s: %w", p, classify(err))
	}
	return nil
}

// Delete removes the object p names. S3 answers a delete of an object that
// is not there as done.
func (s *Store) Delete(ctx context.Context, p Pointer) error {
	if _, err := s.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(p.Bucket), Key: aws.String(p.Key)}); err != nil {
		return fmt.Errorf("deleting the payload %s: %w", p, classify(err))
	}
	return nil
}

// Close releases the idle connections of the client's HTTP client.
func (s *Store) Close() {
	if c, ok := s.api.(*s3.Client); ok {
		awsclient.CloseIdleConnections(c.Options().HTTPClient)
	}
}

// classify adds ErrNotFound or ErrAccessDenied to err when S3 said so: by
// its typed errors or, as emulators differ in error codes, by the HTTP
// status.
func classify(err error) error {
	var nsk *types.NoSuchKey
	var nsb *types.NoSuchBucket
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nsb) || errors.As(err, &nf) {
		return &kindError{kind: ErrNotFound, err: err}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusNotFound:
			return &kindError{kind: ErrNotFound, err: err}
		case http.StatusForbidden:
			return &kindError{kind: ErrAccessDenied, err: err}
		}
	}
	return err
}

// kindError is an S3 error marked with the kind of failure it is: it
// says both and matches both with errors.Is and errors.As.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.kind.Error() + ": " + e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }
