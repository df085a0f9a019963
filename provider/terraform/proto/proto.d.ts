// The build embeds .proto files as text (esbuild's text loader), so the executable is one file.
declare module '*.proto' {
  const text: string;
  export default text;
}
