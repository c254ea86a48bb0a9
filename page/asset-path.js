// Excalidraw loads its fonts from here rather than from a CDN.
window.EXCALIDRAW_ASSET_PATH = "/assets/";
