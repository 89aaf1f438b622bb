import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// A static build (dist/): `mindscape-ui` (ui/serve.py) serves it beside `langgraph dev`.
export default defineConfig({
  plugins: [react()],
  base: "./",
  build: { chunkSizeWarningLimit: 1000 }, // the LangGraph SDK is most of it
});
