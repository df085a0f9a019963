// oidc-provider ships no types; the test IdP (oidc-idp.ts) uses a few of its calls.
declare module 'oidc-provider';
