package awsimport_test

import (
	"fmt"

	"github.com/pipesproject/pipes/awsimport"
)

// A CloudFormation pipe from one template queue to another, with a filter
// and an input template; the queue's name and the region come from the
// template and --param, the account from the environment.
func ExampleImport() {
	template := `
Resources:
  Orders:
    Type: AWS::SQS::Queue
    Properties: {QueueName: orders}
  Shipping:
    Type: AWS::SQS::Queue
    Properties: {QueueName: shipping}
  OrdersPipe:
    Type: AWS::Pipes::Pipe
    Properties:
      Name: !Sub ${AWS::StackName}-paid
      RoleArn: arn:aws:iam::123456789012:role/pipe
      Source: !GetAtt Orders.Arn
      SourceParameters:
        FilterCriteria:
          Filters: [{Pattern: '{"body": {"status": ["paid"]}}'}]
      Target: !GetAtt Shipping.Arn
      TargetParameters:
        InputTemplate: '{"order": <$.body.id>}'
`
	res, err := awsimport.Import("stack.yaml", []byte(template), awsimport.Options{Params: map[string]string{"AWS::Region": "eu-west-1"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(res.YAML))
	fmt.Println("set:", res.Env, "left out:", len(res.LeftOut))
	// Output:
	// # imported from Resources.OrdersPipe (AWS::Pipes::Pipe) of stack.yaml
	// name: paid
	// source:
	//   type: sqs
	//   queue_name: orders
	//   region: eu-west-1
	// filter:
	//   patterns:
	//     - body:
	//         status: [paid]
	// target:
	//   type: sqs
	//   queue_url: https://sqs.eu-west-1.amazonaws.com/${AWS_ACCOUNT_ID}/shipping
	//   region: eu-west-1
	//   input_template: '{"order": <$.body.id>}'
	// set: [AWS_ACCOUNT_ID] left out: 0
}
