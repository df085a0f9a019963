// The webhook senders whose signatures edgeform verifies: the route module's provider and the
// traffic policy's verify-webhook action take these names (matched case-insensitively).
export const WEBHOOK_PROVIDERS = [
  'aftership', 'airship', 'autodesk_forge', 'bitbucket', 'box', 'braintree', 'buildkite', 'calendly', 'castle',
  'chargify', 'circleci', 'clearbit', 'clerk', 'coinbase', 'contentful', 'docusign', 'dropbox', 'facebook_graph_api',
  'facebook_messenger', 'frameio', 'github', 'gitlab', 'go1', 'graphcms', 'heroku', 'hostedhooks', 'hubspot',
  'hygraph', 'instagram_graph_api', 'intercom', 'launchdarkly', 'linear', 'mailchimp', 'mailgun', 'mandrill',
  'microsoft_teams', 'modern_treasury', 'monday', 'mongodb', 'mux', 'nylas', 'okta', 'opsgenie', 'orbit',
  'pagerduty', 'paypal', 'pinwheel', 'plaid', 'postmark', 'pusher', 'sanity', 'segment', 'sendgrid', 'sentry',
  'shopify', 'signalwire', 'slack', 'sns', 'sonatype', 'square', 'stripe', 'svix', 'terraform', 'tiktok', 'treezor',
  'trello', 'twilio', 'twitter', 'typeform', 'vmware', 'webex', 'whatsapp', 'worldline', 'xero', 'zendesk', 'zoom',
] as const;
